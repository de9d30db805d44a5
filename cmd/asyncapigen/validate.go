package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// validatorGen writes validate_gen.go: one function per schema file that
// checks a parsed frame against every constraint the schema states.
type validatorGen struct {
	b       strings.Builder
	vars    strings.Builder // package-level regexps and enum lists
	nvars   int
	usesRe  bool
	emitted map[*Schema]bool
}

func (g *validatorGen) p(format string, args ...any) {
	fmt.Fprintf(&g.b, format, args...)
	g.b.WriteByte('\n')
}

// root writes validate<Title> for a schema file.
func (g *validatorGen) root(s *Schema) error {
	if g.emitted[s] {
		return nil
	}
	g.emitted[s] = true
	g.p("// validate%s checks v, found at path p, against %s.", s.Title, s.where())
	g.p("func validate%s(p string, v any) error {", s.Title)
	if err := g.node(s, "p", "v", 0); err != nil {
		return fmt.Errorf("%s: %w", s.File, err)
	}
	g.p("return nil")
	g.p("}")
	g.p("")
	return nil
}

// node writes the statements that check value expression val at path
// expression path against s; they return the first error.
func (g *validatorGen) node(s *Schema, path, val string, depth int) error {
	if s.Ref != nil {
		g.p("if err := validate%s(%s, %s); err != nil { return err }", s.Ref.Title, path, val)
		return nil
	}
	d := strconv.Itoa(depth)
	null := strconv.FormatBool(s.Nullable)
	complex := len(s.OneOf) > 0 || s.Type() == "object" || s.Type() == "array"
	if complex && !isIdent(path) {
		g.p("{")
		defer g.p("}")
		g.p("q%s := %s", d, path)
		path = "q" + d
	}
	if len(s.OneOf) > 0 {
		disc, err := discriminator(s)
		if err != nil {
			return err
		}
		g.p("{")
		g.p("o%s, err := wire.Object(%s, %s, %s)", d, path, val, null)
		g.p("if err != nil { return err }")
		g.p("if o%s != nil {", d)
		g.p("d%s, err := wire.Discriminator(%s, o%s, %q)", d, path, d, disc)
		g.p("if err != nil { return err }")
		g.p("switch d%s {", d)
		var all []string
		for _, v := range s.OneOf {
			vals := discValues(v.Resolve().Prop(disc).Resolve())
			var quoted []string
			for _, x := range vals {
				quoted = append(quoted, strconv.Quote(x))
				all = append(all, strconv.Quote(x))
			}
			g.p("case %s:", strings.Join(quoted, ", "))
			if err := g.node(v, path, val, depth+1); err != nil {
				return err
			}
		}
		g.p("default: return wire.NoVariant(%s, %q, %q)", path, disc, strings.Join(all, ", "))
		g.p("}")
		g.p("}")
		g.p("}")
		return nil
	}
	switch s.Type() {
	case "":
		// Any JSON value; only const and enum can constrain it.
		if err := g.constEnum(s, path, val); err != nil {
			return err
		}
	case "object":
		values := s.Values != nil && constrains(s.Values)
		needObj := len(s.Props) > 0 || len(s.Required) > 0 || s.Closed || values
		g.p("{")
		if needObj {
			g.p("o%s, err := wire.Object(%s, %s, %s)", d, path, val, null)
		} else {
			g.p("_, err := wire.Object(%s, %s, %s)", path, val, null)
		}
		g.p("if err != nil { return err }")
		if needObj {
			g.p("if o%s != nil {", d)
			if len(s.Required) > 0 {
				g.p("if err := wire.Required(%s, o%s, %s); err != nil { return err }", path, d, quoteList(s.Required))
			}
			if s.Closed {
				var names []string
				for _, p := range s.Props {
					names = append(names, p.Name)
				}
				g.p("if err := wire.Closed(%s, o%s, %s); err != nil { return err }", path, d, quoteList(names))
			}
			for _, p := range s.Props {
				if !constrains(p.Schema) {
					continue
				}
				g.p("if x%s, ok := o%s[%q]; ok {", d, d, p.Name)
				if err := g.node(p.Schema, fmt.Sprintf("wire.Field(%s, %q)", path, escapePointer(p.Name)), "x"+d, depth+1); err != nil {
					return err
				}
				g.p("}")
			}
			if values {
				var names []string
				for _, p := range s.Props {
					names = append(names, p.Name)
				}
				g.p("for _, k%s := range wire.Others(o%s, %s) {", d, d, quoteList(names))
				if err := g.node(s.Values, fmt.Sprintf("wire.Field(%s, wire.Escape(k%s))", path, d), fmt.Sprintf("o%s[k%s]", d, d), depth+1); err != nil {
					return err
				}
				g.p("}")
			}
			g.p("}")
		}
		g.p("}")
	case "array":
		items := s.Items != nil && constrains(s.Items)
		needArr := items || s.MinItems != nil || s.MaxItems != nil
		g.p("{")
		if needArr {
			g.p("a%s, isNull, err := wire.Array(%s, %s, %s)", d, path, val, null)
		} else {
			g.p("_, _, err := wire.Array(%s, %s, %s)", path, val, null)
		}
		g.p("if err != nil { return err }")
		if needArr {
			g.p("if !isNull {")
			if s.MinItems != nil {
				g.p("if err := wire.MinItems(%s, a%s, %d); err != nil { return err }", path, d, *s.MinItems)
			}
			if s.MaxItems != nil {
				g.p("if err := wire.MaxItems(%s, a%s, %d); err != nil { return err }", path, d, *s.MaxItems)
			}
			if items {
				g.p("for i%s, x%s := range a%s {", d, d, d)
				g.p("p%s := wire.Index(%s, i%s)", d, path, d)
				if err := g.node(s.Items, "p"+d, "x"+d, depth+1); err != nil {
					return err
				}
				g.p("}")
			}
			g.p("}")
		}
		g.p("}")
	case "string":
		checks := s.MinLength != nil || s.MaxLength != nil || s.Pattern != "" || s.Format != ""
		g.p("{")
		if checks {
			g.p("s%s, isNull, err := wire.String(%s, %s, %s)", d, path, val, null)
		} else {
			g.p("_, _, err := wire.String(%s, %s, %s)", path, val, null)
		}
		g.p("if err != nil { return err }")
		if checks {
			g.p("if !isNull {")
			if s.MinLength != nil {
				g.p("if err := wire.MinLength(%s, s%s, %d); err != nil { return err }", path, d, *s.MinLength)
			}
			if s.MaxLength != nil {
				g.p("if err := wire.MaxLength(%s, s%s, %d); err != nil { return err }", path, d, *s.MaxLength)
			}
			if s.Pattern != "" {
				g.nvars++
				name := fmt.Sprintf("pattern%d", g.nvars)
				fmt.Fprintf(&g.vars, "var %s = regexp.MustCompile(%q)\n", name, s.Pattern)
				g.usesRe = true
				g.p("if err := wire.Pattern(%s, s%s, %s); err != nil { return err }", path, d, name)
			}
			if s.Format != "" {
				g.p("if err := wire.Format(%s, s%s, %q); err != nil { return err }", path, d, s.Format)
			}
			g.p("}")
		}
		g.p("}")
		if err := g.constEnum(s, path, val); err != nil {
			return err
		}
	case "number", "integer":
		fn := "Number"
		if s.Type() == "integer" {
			fn = "Integer"
		}
		checks := s.Minimum != nil || s.Maximum != nil || s.ExclMinimum != nil
		g.p("{")
		if checks {
			g.p("n%s, isNull, err := wire.%s(%s, %s, %s)", d, fn, path, val, null)
		} else {
			g.p("_, _, err := wire.%s(%s, %s, %s)", fn, path, val, null)
		}
		g.p("if err != nil { return err }")
		if checks {
			g.p("if !isNull {")
			if s.Minimum != nil {
				g.p("if err := wire.Minimum(%s, n%s, %v); err != nil { return err }", path, d, *s.Minimum)
			}
			if s.ExclMinimum != nil {
				g.p("if err := wire.ExclusiveMinimum(%s, n%s, %v); err != nil { return err }", path, d, *s.ExclMinimum)
			}
			if s.Maximum != nil {
				g.p("if err := wire.Maximum(%s, n%s, %v); err != nil { return err }", path, d, *s.Maximum)
			}
			g.p("}")
		}
		g.p("}")
		if err := g.constEnum(s, path, val); err != nil {
			return err
		}
	case "boolean":
		g.p("if err := wire.Bool(%s, %s, %s); err != nil { return err }", path, val, null)
		if err := g.constEnum(s, path, val); err != nil {
			return err
		}
	}
	return nil
}

func isIdent(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// constrains reports whether s rules out any JSON value at all.
func constrains(s *Schema) bool {
	return s.Ref != nil || len(s.OneOf) > 0 || s.Type() != "" || s.HasConst || len(s.Enum) > 0
}

// constEnum writes the const and enum checks of s, skipped for an allowed null.
func (g *validatorGen) constEnum(s *Schema, path, val string) error {
	if !s.HasConst && len(s.Enum) == 0 {
		return nil
	}
	if s.Nullable {
		g.p("if %s != nil {", val)
		defer g.p("}")
	}
	if s.HasConst {
		lit, err := goLiteral(s.Const)
		if err != nil {
			return err
		}
		g.p("if err := wire.Const(%s, %s, %s, %q); err != nil { return err }", path, val, lit, display(s.Const))
	}
	if len(s.Enum) > 0 {
		g.nvars++
		name := fmt.Sprintf("enum%d", g.nvars)
		var lits, shown []string
		for _, e := range s.Enum {
			lit, err := goLiteral(e)
			if err != nil {
				return err
			}
			lits = append(lits, lit)
			shown = append(shown, display(e))
		}
		fmt.Fprintf(&g.vars, "var %s = []any{%s}\n", name, strings.Join(lits, ", "))
		g.p("if err := wire.Enum(%s, %s, %s, %q); err != nil { return err }", path, val, name, strings.Join(shown, ", "))
	}
	return nil
}

// goLiteral is the Go expression for a JSON scalar as encoding/json decodes it.
func goLiteral(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x), nil
	case float64:
		return "float64(" + strconv.FormatFloat(x, 'g', -1, 64) + ")", nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "nil", nil
	}
	return "", fmt.Errorf("const and enum values must be scalars, got %T", v)
}

// display is a JSON value as an error message shows it.
func display(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case nil:
		return "null"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

func escapePointer(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
