package image

import (
	"errors"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// entryError is the failure of one entry of an image's tar: the entry's
// name is the image's, up to the MiB a tar header holds, and the cause often
// quotes it again. It shows podspec.MaxOutput of both and wraps the cause.
type entryError struct {
	name string
	err  error
}

func (e *entryError) Error() string {
	return podspec.Truncate("entry "+podspec.Truncate(e.name, podspec.MaxOutput)+": "+e.err.Error(), podspec.MaxOutput)
}

func (e *entryError) Unwrap() error { return e.err }

// errEscapesLayout: an OCI archive's entry names a path outside its layout.
var errEscapesLayout = errors.New("escapes the layout")
