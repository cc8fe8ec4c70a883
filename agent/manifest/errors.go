package manifest

import (
	"errors"
	"fmt"
	"sort"
)

// Error is one reason a manifest cannot be used. Origin names the file or URL,
// Field the offending field path ("" when the whole document is at fault).
type Error struct {
	Origin string
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.Origin, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.Origin, e.Field, e.Reason)
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

// fieldErrors collects validation failures of one document.
type fieldErrors struct {
	origin string
	errs   []error
}

func (f *fieldErrors) add(field, format string, args ...any) {
	f.errs = append(f.errs, &Error{Origin: f.origin, Field: field, Reason: fmt.Sprintf(format, args...)})
}

// err returns the failures sorted by field, so the report is stable.
func (f *fieldErrors) err() error {
	sort.SliceStable(f.errs, func(i, j int) bool {
		return f.errs[i].(*Error).Field < f.errs[j].(*Error).Field
	})
	return errors.Join(f.errs...)
}
