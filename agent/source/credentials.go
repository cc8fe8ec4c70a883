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
	// Each credential is read once a list, and its value shared by the
	// Secrets that name it (nothing changes a Secret's data): a manifest
	// of a few KiB naming a 1 MiB credential from a thousand Secrets
	// would otherwise hold a GiB of copies.
	type credential struct {
		data []byte
		err  error
	}
	read := map[string]credential{}
	readOnce := func(name string, limit int64) ([]byte, error) {
		if dir == "" {
			return nil, errNoCredentialsDir
		}
		c, ok := read[name]
		if !ok {
			c.data, c.err = ReadCredential(dir, name, maxSecretSize)
			read[name] = c
		}
		if c.err != nil {
			return nil, c.err
		}
		if int64(len(c.data)) > limit {
			return nil, errTooLarge(dir, name, limit)
		}
		return c.data, nil
	}
	for _, o := range objs {
		filled, err := objects.Fill(o, readOnce)
		if err != nil {
			problems = append(problems, manifest.Problem{Origin: o.Origin,
				Err: fmt.Errorf("%s: %w; the Secret is not given to pods until it can be read", o.Origin, err)})
			continue
		}
		out = append(out, filled)
	}
	return out, problems
}

// errTooLarge is why a credential's value does not fit in what its Secret
// has left of maxSecretSize.
func errTooLarge(dir, name string, limit int64) error {
	return fmt.Errorf("%s/%s: larger than the %d bytes the Secret has left of %d", dir, name, limit, maxSecretSize)
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
