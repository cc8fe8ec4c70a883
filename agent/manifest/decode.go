package manifest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// typeCheck walks a generic JSON document beside the Go type it is to be
// decoded into, as encoding/json (case-sensitively, as sigs.k8s.io/json)
// would decode it, and collects what such a decode reports only one at a time
// and without a field path: a value of the wrong JSON type, an integer out of
// range, a quantity or duration that does not parse. Each becomes a field
// error naming the path and the value, and the value is taken out of the
// document, so that the rest decodes and can be validated too. Keys that name
// no field are collected as unknown (the kubelet drops them silently).
type typeCheck struct {
	errs    field.ErrorList
	unknown []*field.Path
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// value checks v against t at p and reports whether v may stay; a value that
// may not is removed (from an object) or replaced by null (in a list, so that
// the indexes of later entries keep their meaning).
func (c *typeCheck) value(v any, t reflect.Type, p *field.Path) bool {
	if v == nil {
		return true // null decodes into anything, as the zero value
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		// Quantities, times, IntOrString: their own parser says what is wrong.
		js, err := json.Marshal(v)
		if err == nil {
			err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(js)
		}
		if err != nil {
			c.errs = append(c.errs, field.Invalid(p, v, err.Error()))
			return false
		}
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return c.wrongType(v, p, "an object")
		}
		fields := jsonFields(t)
		for k, e := range m {
			ft, ok := fields[k]
			if !ok {
				c.unknown = append(c.unknown, p.Child(k))
				continue
			}
			if !c.value(e, ft, p.Child(k)) {
				delete(m, k)
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return c.wrongType(v, p, "an object")
		}
		for k, e := range m {
			if !c.value(e, t.Elem(), p.Key(k)) {
				delete(m, k)
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte is base64 in JSON
			s, ok := v.(string)
			if !ok {
				return c.wrongType(v, p, "a base64 string")
			}
			if _, err := base64.StdEncoding.DecodeString(s); err != nil {
				c.errs = append(c.errs, field.Invalid(p, v, "must be base64: "+err.Error()))
				return false
			}
			return true
		}
		l, ok := v.([]any)
		if !ok {
			return c.wrongType(v, p, "a list")
		}
		for i, e := range l {
			if !c.value(e, t.Elem(), p.Index(i)) {
				l[i] = nil
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return c.wrongType(v, p, "a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return c.wrongType(v, p, "true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return c.wrongType(v, p, "an integer")
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return c.outOfRange(v, p, t, err)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return c.wrongType(v, p, "an integer")
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return c.outOfRange(v, p, t, err)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return c.wrongType(v, p, "a number")
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return c.outOfRange(v, p, t, err)
		}
	}
	return true // interfaces take anything
}

func (c *typeCheck) wrongType(v any, p *field.Path, want string) bool {
	c.errs = append(c.errs, field.Invalid(p, v, "must be "+want+", not "+jsonKind(v)))
	return false
}

func (c *typeCheck) outOfRange(v any, p *field.Path, t reflect.Type, err error) bool {
	var ne *strconv.NumError
	msg := "must be a whole number"
	switch {
	case strings.HasPrefix(t.Kind().String(), "float"):
		msg = "must be a number"
	case errors.As(err, &ne) && ne.Err == strconv.ErrRange:
		msg = "out of range: " + intRange(t)
	default:
		msg += " (" + intRange(t) + ")"
	}
	c.errs = append(c.errs, field.Invalid(p, v, msg))
	return false
}

func intRange(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		bits := t.Bits()
		return "from " + strconv.FormatInt(-1<<(bits-1), 10) + " to " + strconv.FormatInt(1<<(bits-1)-1, 10)
	default:
		return "from 0 to " + strconv.FormatUint(uint64(1)<<t.Bits()-1, 10)
	}
}

// jsonKind names the JSON type of a generic value.
func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "true or false"
	}
	return "null"
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the JSON names of struct t's fields, embedded and inline
// ones included, to their types, as encoding/json matches them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	var inline []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			inline = append(inline, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	// A field of t hides an embedded struct's field of the same name.
	for _, ft := range inline {
		for k, v := range jsonFields(ft) {
			if _, ok := m[k]; !ok {
				m[k] = v
			}
		}
	}
	fieldCache.Store(t, m)
	return m
}
