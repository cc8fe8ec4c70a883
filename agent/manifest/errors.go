package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Error is one reason a manifest cannot be used. Origin names the file or URL,
// Field the offending field path ("" when the whole document is at fault),
// Value the offending value as written, shortened, unquoted ("" when none
// applies).
type Error struct {
	Origin string
	Field  string
	Value  string
	// Reason says what is wrong, the value included:
	// `Invalid value: "32Megs": quantities must match ...`, `Required value`.
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.Origin, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.Origin, e.Field, e.Reason)
}

// Warning is something in a usable manifest worth fixing: an unknown field, a
// value taken differently from how it is written.
type Warning struct {
	Origin  string
	Field   string // "" when about the whole document
	Message string
}

func (w Warning) String() string {
	if w.Field == "" {
		return fmt.Sprintf("%s: %s", w.Origin, w.Message)
	}
	return fmt.Sprintf("%s: %s: %s", w.Origin, w.Field, w.Message)
}

// Errors returns the *Error values inside err (one per line of errors.Join), or
// nil when err holds none.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
			return
		}
		var e *Error
		if errors.As(err, &e) {
			out = append(out, e)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// fromField turns a validation error of apimachinery's into an *Error of origin.
func fromField(origin string, fe *field.Error) *Error {
	e := &Error{Origin: origin, Field: fe.Field, Reason: fe.Type.String()}
	switch fe.Type {
	case field.ErrorTypeRequired, field.ErrorTypeForbidden, field.ErrorTypeTooLong,
		field.ErrorTypeTooShort, field.ErrorTypeInternal:
	default:
		if fe.BadValue != nil || fe.Type == field.ErrorTypeInvalid {
			var shown string
			e.Value, shown = showValue(fe.BadValue)
			e.Reason += ": " + shown
		}
	}
	if fe.Detail != "" {
		e.Reason += ": " + fe.Detail
	}
	return e
}

// fieldErrors turns a list of validation errors into *Errors of origin, sorted
// by field so that a report is stable.
func fieldErrors(origin string, list field.ErrorList) []*Error {
	out := make([]*Error, 0, len(list))
	for _, fe := range list {
		out = append(out, fromField(origin, fe))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// maxShown is how much of a bad value an error shows (podspec.MaxShown).
const maxShown = podspec.MaxShown

// showValue renders a bad value the way the manifest would write it: a string
// quoted (invalid UTF-8 and control characters escaped), a number as written,
// an object or list as JSON, anything longer than maxShown shortened. plain is
// the same without the quotes around a string.
func showValue(v any) (plain, shown string) {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "null", "null"
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return "null", "null"
	}
	if rv.Kind() == reflect.String && rv.Type() != reflect.TypeFor[json.Number]() {
		return shorten(rv.String()), quote(rv.String())
	}
	var s string
	switch x := rv.Interface().(type) {
	case json.Number:
		s = string(x)
	case fmt.Stringer:
		if _, isJSON := x.(json.Marshaler); !isJSON {
			return shorten(x.String()), quote(x.String())
		}
	}
	if s == "" {
		js, err := json.Marshal(rv.Interface())
		if err != nil {
			str := fmt.Sprint(rv.Interface())
			return shorten(str), quote(str)
		}
		s = string(js)
	}
	return shorten(s), shorten(s)
}

func quote(s string) string { return podspec.Quote(s) }

func shorten(s string) string { return podspec.Shorten(s) }

// under reports whether path is p or inside it ("spec.containers[0]" is under
// "spec.containers" and "spec").
func under(path, p string) bool {
	return path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[")
}
