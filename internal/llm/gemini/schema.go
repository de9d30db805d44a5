package gemini

import (
	"fmt"

	"github.com/go-faster/jx"
	"google.golang.org/genai"
)

// responseSchema converts a JSON Schema (llm.Schema.JSON) into the API's
// Schema, the OpenAPI subset responseSchema takes: properties keep their
// order (propertyOrdering, which the model writes them in), a type list
// with "null" becomes nullable, and additionalProperties, which the
// subset lacks, is left out. A keyword it cannot express ($ref, oneOf,
// ...) is an error.
func responseSchema(raw []byte) (*genai.Schema, error) {
	return schemaNode(jx.DecodeBytes(raw))
}

var schemaTypes = map[string]genai.Type{
	"string": genai.TypeString, "number": genai.TypeNumber, "integer": genai.TypeInteger,
	"boolean": genai.TypeBoolean, "array": genai.TypeArray, "object": genai.TypeObject, "null": genai.TypeNULL,
}

func schemaNode(d *jx.Decoder) (*genai.Schema, error) {
	if d.Next() != jx.Object {
		return nil, fmt.Errorf("a schema is not an object")
	}
	s := &genai.Schema{}
	err := d.ObjBytes(func(d *jx.Decoder, key []byte) error {
		var err error
		switch k := string(key); k {
		case "type":
			err = schemaType(d, s)
		case "description":
			s.Description, err = d.Str()
		case "title":
			s.Title, err = d.Str()
		case "format":
			s.Format, err = d.Str()
		case "pattern":
			s.Pattern, err = d.Str()
		case "enum":
			err = d.Arr(func(d *jx.Decoder) error {
				v, err := d.Str()
				s.Enum = append(s.Enum, v)
				return err
			})
		case "items":
			s.Items, err = schemaNode(d)
		case "properties":
			s.Properties = map[string]*genai.Schema{}
			err = d.ObjBytes(func(d *jx.Decoder, name []byte) error {
				p, err := schemaNode(d)
				s.Properties[string(name)] = p
				s.PropertyOrdering = append(s.PropertyOrdering, string(name))
				return err
			})
		case "required":
			err = d.Arr(func(d *jx.Decoder) error {
				v, err := d.Str()
				s.Required = append(s.Required, v)
				return err
			})
		case "anyOf":
			err = d.Arr(func(d *jx.Decoder) error {
				v, err := schemaNode(d)
				s.AnyOf = append(s.AnyOf, v)
				return err
			})
		case "minItems":
			s.MinItems, err = count(d)
		case "maxItems":
			s.MaxItems, err = count(d)
		case "minLength":
			s.MinLength, err = count(d)
		case "maxLength":
			s.MaxLength, err = count(d)
		case "minimum":
			s.Minimum, err = number(d)
		case "maximum":
			s.Maximum, err = number(d)
		case "additionalProperties", "$schema", "default", "examples":
			err = d.Skip()
		default:
			return fmt.Errorf("responseSchema cannot express %q", k)
		}
		return err
	})
	return s, err
}

// schemaType reads "type": a name, or a list of names of which "null"
// makes the schema nullable.
func schemaType(d *jx.Decoder, s *genai.Schema) error {
	set := func(name string) error {
		t, ok := schemaTypes[name]
		switch {
		case !ok:
			return fmt.Errorf("unknown type %q", name)
		case t == genai.TypeNULL:
			s.Nullable = genai.Ptr(true)
		case s.Type != "":
			return fmt.Errorf("responseSchema cannot express a value of several types")
		default:
			s.Type = t
		}
		return nil
	}
	if d.Next() == jx.Array {
		return d.Arr(func(d *jx.Decoder) error {
			name, err := d.Str()
			if err != nil {
				return err
			}
			return set(name)
		})
	}
	name, err := d.Str()
	if err != nil {
		return err
	}
	return set(name)
}

func count(d *jx.Decoder) (*int64, error) {
	n, err := d.Int64()
	return &n, err
}

func number(d *jx.Decoder) (*float64, error) {
	f, err := d.Float64()
	return &f, err
}
