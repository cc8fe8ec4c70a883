package source

import (
	"errors"
	"fmt"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
)

// maxSecretSize is what all the values of one Secret may come to.
const maxSecretSize = objects.MaxSize

// errNoCredentialsDir is why no credential can be read at all.
var errNoCredentialsDir = errors.New("no credentials directory: $CREDENTIALS_DIRECTORY is not set " +
	"(systemd sets it for a unit with LoadCredential=, LoadCredentialEncrypted= or SetCredentialEncrypted=) and credentialsDirectory is not configured")

// fillCredentials gives each Secret that takes values from credentials
// (objects.AnnotationCredentials) those values, read from dir (the unit's
// $CREDENTIALS_DIRECTORY) with ReadCredential. A Secret whose credentials
// cannot all be read is left out, so that a pod using it waits as for a
// missing Secret, and a problem of its origin names the Secret, the key and
// the credential. objs is not changed.
func fillCredentials(dir string, objs []*objects.Object) ([]*objects.Object, []manifest.Problem) {
	out := make([]*objects.Object, 0, len(objs))
	var problems []manifest.Problem
	read := func(name string, limit int64) ([]byte, error) {
		if dir == "" {
			return nil, errNoCredentialsDir
		}
		return ReadCredential(dir, name, limit)
	}
	for _, o := range objs {
		filled, err := objects.Fill(o, read)
		if err != nil {
			problems = append(problems, manifest.Problem{Origin: o.Origin,
				Err: fmt.Errorf("%s: %w; the Secret is not given to pods until it can be read", o.Origin, err)})
			continue
		}
		out = append(out, filled)
	}
	return out, problems
}

// CredentialReader reads credentials in dir with ReadCredential, for
// objects.Fill; nil when dir is "" (none to read).
func CredentialReader(dir string) func(name string, limit int64) ([]byte, error) {
	if dir == "" {
		return nil
	}
	return func(name string, limit int64) ([]byte, error) { return ReadCredential(dir, name, limit) }
}

// ReadCredential reads the credential name in dir: a regular file directly
// in dir, not a symlink (none is followed: a credential cannot lead out of
// the directory), at most limit bytes. name must be a valid credential name
// (objects.ValidCredentialName): no '/', not "." or "..".
func ReadCredential(dir, name string, limit int64) ([]byte, error) {
	if !objects.ValidCredentialName(name) {
		return nil, fmt.Errorf("%q is not a credential name", name)
	}
	return readCredential(dir, name, limit)
}
