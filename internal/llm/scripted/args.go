package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// args is a tool call's arguments, compiled from YAML. A mapping becomes a
// JSON object with its keys in the order written and templates in its
// string values; a string is sent verbatim, valid JSON or not, so that a
// scenario can exercise how malformed arguments are handled.
type args struct {
	raw  string // verbatim arguments, when set
	tree jsonValue
}

// jsonValue is one value of an arguments object.
type jsonValue struct {
	literal json.RawMessage // scalars without templates, and null
	tmpl    *text           // a templated string
	keys    []string        // object keys, in order (object when obj is set)
	obj     []jsonValue
	isObj   bool
	arr     []jsonValue
	isArr   bool
}

// compileArgs compiles the arguments node of a tool call; name labels
// template errors.
func compileArgs(n *yaml.Node, name string) (args, error) {
	if n.Kind == 0 { // no arguments given
		return args{raw: "{}"}, nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		return args{raw: n.Value}, nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return args{raw: "{}"}, nil
	}
	if n.Kind != yaml.MappingNode {
		return args{}, at(n.Line, fmt.Errorf("arguments: want a mapping (sent as a JSON object) or a string (sent verbatim)"))
	}
	v, err := compileValue(n, name)
	if err != nil {
		return args{}, fmt.Errorf("arguments: %w", err)
	}
	return args{tree: v}, nil
}

func compileValue(n *yaml.Node, name string) (jsonValue, error) {
	if n.Kind == yaml.AliasNode {
		return compileValue(n.Alias, name)
	}
	switch n.Kind {
	case yaml.MappingNode:
		v := jsonValue{isObj: true}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return jsonValue{}, at(k.Line, fmt.Errorf("object keys must be strings"))
			}
			e, err := compileValue(n.Content[i+1], name+"."+k.Value)
			if err != nil {
				return jsonValue{}, err
			}
			v.keys = append(v.keys, k.Value)
			v.obj = append(v.obj, e)
		}
		return v, nil
	case yaml.SequenceNode:
		v := jsonValue{isArr: true, arr: []jsonValue{}}
		for i, c := range n.Content {
			e, err := compileValue(c, fmt.Sprintf("%s[%d]", name, i))
			if err != nil {
				return jsonValue{}, err
			}
			v.arr = append(v.arr, e)
		}
		return v, nil
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			t, err := compileText(name, n.Value)
			if err != nil {
				return jsonValue{}, at(n.Line, err)
			}
			if t.tmpl != nil {
				return jsonValue{tmpl: &t}, nil
			}
		}
		var x any
		if err := n.Decode(&x); err != nil {
			return jsonValue{}, at(n.Line, err)
		}
		b, err := marshal(x)
		if err != nil {
			return jsonValue{}, at(n.Line, fmt.Errorf("%s cannot be sent as JSON", n.Value))
		}
		return jsonValue{literal: b}, nil
	}
	return jsonValue{}, at(n.Line, fmt.Errorf("unsupported YAML node"))
}

// render returns the arguments' JSON text for one turn.
func (a args) render(tc *turn) (string, error) {
	if a.raw != "" {
		return a.raw, nil
	}
	var buf bytes.Buffer
	if err := a.tree.write(&buf, tc); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func (v jsonValue) write(buf *bytes.Buffer, tc *turn) error {
	switch {
	case v.isObj:
		buf.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := v.obj[i].write(buf, tc); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case v.isArr:
		buf.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := e.write(buf, tc); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case v.tmpl != nil:
		s, err := v.tmpl.render(tc)
		if err != nil {
			return err
		}
		b, _ := marshal(s)
		buf.Write(b)
	default:
		buf.Write(v.literal)
	}
	return nil
}

// marshal encodes x as JSON without escaping <, > and &, so that arguments
// such as "a && b" read in deltas as they were written.
func marshal(x any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
