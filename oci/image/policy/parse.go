package policy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Limits on what a policy reads: its file, and each key file it names.
const (
	maxPolicyBytes = 1 << 20
	maxKeyBytes    = 64 << 10
)

// Requirement types of containers-policy.json(5).
const (
	typeInsecureAcceptAnything = "insecureAcceptAnything"
	typeReject                 = "reject"
	typeSigstoreSigned         = "sigstoreSigned"
)

// knownTransport says whether name is a transport containers-transports(5)
// defines. Only the three images arrive by here are ever consulted; the
// sections of the others (a podman host's docker-daemon,
// containers-storage, …) are checked like the rest, so that one file
// serves both. (A switch, not a map: package inits run at every re-exec.)
func knownTransport(name string) bool {
	switch name {
	case TransportDocker, TransportDockerArchive, TransportOCIArchive,
		"containers-storage", "dir", "docker-daemon", "oci", "ostree", "sif", "tarball", "atomic":
		return true
	}
	return false
}

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	data, err := atomicfile.Read(path, maxPolicyBytes)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse parses a policy; origin names it in errors ("F: JSON path: reason").
// It is strict, as containers/image's parser is: an unknown or repeated
// field, a requirement type or option this package does not implement, an
// empty list of requirements or a scope that can never match is an error
// naming the JSON path, never ignored.
func Parse(data []byte, origin string) (*Policy, error) {
	p := &parser{origin: origin}
	pol, err := p.policy(data)
	if err != nil {
		return nil, err
	}
	pol.Origin = origin
	return pol, nil
}

type parser struct{ origin string }

// errorf is an error at path of the file: "F: path: reason".
func (p *parser) errorf(path, format string, args ...any) error {
	if path == "" {
		path = "(top level)"
	}
	return fmt.Errorf("%s: %s: %s", p.origin, path, podspec.Truncate(fmt.Sprintf(format, args...), MaxReason))
}

// member is one field of a JSON object.
type member struct {
	key   string
	value json.RawMessage
}

// object reads the members of the JSON object data, in order, refusing
// duplicate keys (encoding/json keeps the last one silently).
func (p *parser) object(path string, data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, p.errorf(path, "not a JSON object")
	}
	var ms []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, p.errorf(path, "%v", err)
		}
		key := tok.(string) // a key inside an object is always a string
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, p.errorf(field(path, key), "%v", err)
		}
		if seen[key] {
			return nil, p.errorf(field(path, key), "given more than once")
		}
		seen[key] = true
		ms = append(ms, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, p.errorf(path, "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, p.errorf(path, "data after the JSON object")
	}
	return ms, nil
}

func (p *parser) array(path string, data []byte) ([]json.RawMessage, error) {
	if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("[")) {
		return nil, p.errorf(path, "not a JSON array")
	}
	var a []json.RawMessage
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, p.errorf(path, "%v", err)
	}
	return a, nil
}

func (p *parser) string(path string, data []byte) (string, error) {
	var s string
	if !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte(`"`)) || json.Unmarshal(data, &s) != nil {
		return "", p.errorf(path, "not a JSON string")
	}
	return s, nil
}

// isIdentifier says whether key can follow a dot in a path unquoted.
func isIdentifier(key string) bool {
	if key == "" || len(key) > 64 {
		return false
	}
	for i, c := range key {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && (c == '-' || '0' <= c && c <= '9'):
		default:
			return false
		}
	}
	return true
}

// field is path's member key, spelled as jq does: .key, or ."key" when key
// is not an identifier; quoted and cut, so a hostile key stays one line.
func field(path, key string) string {
	if isIdentifier(key) {
		return path + "." + key
	}
	return path + "." + strconv.Quote(podspec.Truncate(key, podspec.MaxShown))
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// quote shows a value of the file in a message: quoted and cut.
func quote(s string) string { return strconv.Quote(podspec.Truncate(s, podspec.MaxShown)) }

func (p *parser) policy(data []byte) (*Policy, error) {
	ms, err := p.object("", data)
	if err != nil {
		return nil, err
	}
	pol := &Policy{transports: map[string]map[string]requirements{}}
	for _, m := range ms {
		switch m.key {
		case "default":
			if pol.def, err = p.requirements("default", m.value); err != nil {
				return nil, err
			}
		case "transports":
			if err := p.transports(pol, m.value); err != nil {
				return nil, err
			}
		default:
			return nil, p.errorf(field("", m.key), "unknown field")
		}
	}
	if pol.def == nil {
		return nil, p.errorf("default", "missing: it is what images no scope of transports matches must meet")
	}
	return pol, nil
}

func (p *parser) transports(pol *Policy, data []byte) error {
	ms, err := p.object("transports", data)
	if err != nil {
		return err
	}
	for _, m := range ms {
		path := field("transports", m.key)
		if !knownTransport(m.key) {
			return p.errorf(path, "unknown transport (images arrive by %s, %s and %s)", TransportDocker, TransportDockerArchive, TransportOCIArchive)
		}
		scopes, err := p.object(path, m.value)
		if err != nil {
			return err
		}
		t := map[string]requirements{}
		for _, s := range scopes {
			spath := field(path, s.key)
			if err := validScope(m.key, s.key); err != nil {
				return p.errorf(spath, "%v", err)
			}
			if t[s.key], err = p.requirements(spath, s.value); err != nil {
				return err
			}
		}
		pol.transports[m.key] = t
	}
	return nil
}

func (p *parser) requirements(path string, data []byte) (requirements, error) {
	a, err := p.array(path, data)
	if err != nil {
		return nil, err
	}
	if len(a) == 0 {
		return nil, p.errorf(path, "an empty list of requirements: write [{\"type\": \"reject\"}] or [{\"type\": \"insecureAcceptAnything\"}]")
	}
	reqs := make(requirements, len(a))
	for i, raw := range a {
		if err := p.requirement(&reqs[i], index(path, i), raw); err != nil {
			return nil, err
		}
	}
	return reqs, nil
}

// notImplemented says why a requirement type or a sigstoreSigned option
// of containers-policy.json(5) is refused ("" when it is not one): refused,
// not ignored, since ignoring a requirement accepts what the operator meant
// to refuse.
func notImplemented(name string) string {
	switch name {
	case "signedBy":
		return "GPG signatures are not implemented; sign with cosign and require sigstoreSigned"
	case "signedBaseLayer":
		return "not implemented"
	case "fulcio":
		return "keyless (Fulcio) verification is not implemented: it needs a trusted root; use keyPath"
	case "pki":
		return "X.509 PKI verification is not implemented; use keyPath"
	case "rekorPublicKeyPath", "rekorPublicKeyPaths", "rekorPublicKeyData", "rekorPublicKeyDatas":
		return "transparency log (Rekor) verification is not implemented: verification is offline, by key"
	}
	return ""
}

func (p *parser) requirement(r *requirement, path string, data []byte) error {
	ms, err := p.object(path, data)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.key == "type" {
			if r.kind, err = p.string(field(path, "type"), m.value); err != nil {
				return err
			}
		}
	}
	switch r.kind {
	case "":
		return p.errorf(field(path, "type"), "missing")
	case typeInsecureAcceptAnything, typeReject:
		for _, m := range ms {
			if m.key != "type" {
				return p.errorf(field(path, m.key), "unknown field of %q", r.kind)
			}
		}
		return nil
	case typeSigstoreSigned:
		return p.sigstoreSigned(r, path, ms)
	}
	if why := notImplemented(r.kind); why != "" {
		return p.errorf(field(path, "type"), "%q: %s", r.kind, why)
	}
	return p.errorf(field(path, "type"), "unknown requirement type %s", quote(r.kind))
}

func (p *parser) sigstoreSigned(r *requirement, path string, ms []member) error {
	sources := 0
	for _, m := range ms {
		switch m.key {
		case "type", "signedIdentity":
		case "keyPath", "keyPaths", "keyData", "keyDatas":
			sources++
		default:
			if why := notImplemented(m.key); why != "" {
				return p.errorf(field(path, m.key), "%s", why)
			}
			return p.errorf(field(path, m.key), "unknown field of %q", typeSigstoreSigned)
		}
	}
	if sources != 1 {
		return p.errorf(path, "exactly one of keyPath, keyPaths, keyData and keyDatas must be given (%d are)", sources)
	}
	for _, m := range ms {
		mpath := field(path, m.key)
		var err error
		switch m.key {
		case "type":
		case "keyPath":
			var f string
			if f, err = p.string(mpath, m.value); err == nil {
				err = p.keyFile(r, mpath, f)
			}
		case "keyPaths":
			var a []json.RawMessage
			if a, err = p.array(mpath, m.value); err == nil && len(a) == 0 {
				err = p.errorf(mpath, "empty")
			}
			for i := 0; err == nil && i < len(a); i++ {
				var f string
				if f, err = p.string(index(mpath, i), a[i]); err == nil {
					err = p.keyFile(r, index(mpath, i), f)
				}
			}
		case "keyData":
			err = p.keyData(r, mpath, "keyData", m.value)
		case "keyDatas":
			var a []json.RawMessage
			if a, err = p.array(mpath, m.value); err == nil && len(a) == 0 {
				err = p.errorf(mpath, "empty")
			}
			for i := 0; err == nil && i < len(a); i++ {
				err = p.keyData(r, index(mpath, i), "keyDatas["+strconv.Itoa(i)+"]", a[i])
			}
		case "signedIdentity":
			r.identity, err = p.identity(mpath, m.value)
		}
		if err != nil {
			return err
		}
	}
	if r.identity == nil {
		r.identity = &identity{kind: matchRepoDigestOrExact}
	}
	return nil
}

// keyFile reads a public key file: an absolute path, since a daemon's
// working directory is nobody's choice.
func (p *parser) keyFile(r *requirement, path, file string) error {
	if !filepath.IsAbs(file) {
		return p.errorf(path, "%s is not an absolute path", quote(file))
	}
	data, err := atomicfile.Read(file, maxKeyBytes)
	if err != nil {
		return p.errorf(path, "%v", err)
	}
	k, err := newKey(filepath.Base(file), data)
	if err != nil {
		return p.errorf(path, "%s: %v", file, err)
	}
	r.keys = append(r.keys, k)
	return nil
}

// keyData is a key given inline: the PEM text, base64-encoded (a JSON
// []byte, as containers/image reads it).
func (p *parser) keyData(r *requirement, path, name string, raw []byte) error {
	s, err := p.string(path, raw)
	if err != nil {
		return err
	}
	if len(s) > 2*maxKeyBytes {
		return p.errorf(path, "larger than %d bytes", maxKeyBytes)
	}
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return p.errorf(path, "not base64 (keyData is the key's PEM text, base64-encoded)")
	}
	k, err := newKey(name, data)
	if err != nil {
		return p.errorf(path, "%v", err)
	}
	r.keys = append(r.keys, k)
	return nil
}

// newKey loads a PEM public key with the sigstore libraries. Its errors
// never quote the file: it may be a private key put there by mistake.
func newKey(name string, pemData []byte) (*key, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemData)
	if err != nil {
		return nil, errors.New("not a PEM public key (PKIX \"PUBLIC KEY\" or PKCS#1 \"RSA PUBLIC KEY\")")
	}
	return loadKey(name, pub)
}

func (p *parser) identity(path string, data []byte) (*identity, error) {
	ms, err := p.object(path, data)
	if err != nil {
		return nil, err
	}
	id := &identity{}
	var names []string // the type's fields, in the order they are reported missing
	fields := map[string]*string{}
	for _, m := range ms {
		if m.key == "type" {
			if id.kind, err = p.string(field(path, "type"), m.value); err != nil {
				return nil, err
			}
		}
	}
	switch id.kind {
	case "":
		return nil, p.errorf(field(path, "type"), "missing")
	case matchExact, matchRepoDigestOrExact, matchRepository:
	case exactReference:
		names, fields["dockerReference"] = []string{"dockerReference"}, &id.reference
	case exactRepository:
		names, fields["dockerRepository"] = []string{"dockerRepository"}, &id.reference
	case remapIdentity:
		names = []string{"prefix", "signedPrefix"}
		fields["prefix"], fields["signedPrefix"] = &id.prefix, &id.signedPrefix
	default:
		return nil, p.errorf(field(path, "type"), "unknown signedIdentity type %s", quote(id.kind))
	}
	for _, m := range ms {
		if m.key == "type" {
			continue
		}
		dst, ok := fields[m.key]
		if !ok {
			return nil, p.errorf(field(path, m.key), "unknown field of %q", id.kind)
		}
		if *dst, err = p.string(field(path, m.key), m.value); err != nil {
			return nil, err
		}
		delete(fields, m.key)
	}
	for _, f := range names {
		if _, ok := fields[f]; ok {
			return nil, p.errorf(field(path, f), "missing")
		}
	}
	switch id.kind {
	case exactReference:
		ref, err := parseDockerRef(id.reference)
		if err != nil {
			return nil, p.errorf(field(path, "dockerReference"), "%v", err)
		}
		if ref.nameOnly() {
			return nil, p.errorf(field(path, "dockerReference"), "%s has neither a tag nor a digest", quote(id.reference))
		}
	case exactRepository:
		if _, err := parseDockerRef(id.reference); err != nil {
			return nil, p.errorf(field(path, "dockerRepository"), "%v", err)
		}
	case remapIdentity:
		if err := validPrefix(id.prefix); err != nil {
			return nil, p.errorf(field(path, "prefix"), "%v", err)
		}
		if err := validPrefix(id.signedPrefix); err != nil {
			return nil, p.errorf(field(path, "signedPrefix"), "%v", err)
		}
	}
	return id, nil
}

// validScope checks a scope of transport as containers/image does, and
// further refuses a docker scope that can never match because it is not
// spelled in full (lookups are by "docker.io/library/busybox", never by
// "busybox").
func validScope(transport, scope string) error {
	if scope == "" {
		return nil
	}
	switch transport {
	case TransportDocker:
		return validDockerScope(scope)
	case TransportDockerArchive:
		return errors.New(`docker-archive has no scopes but the default ""`)
	case TransportOCIArchive, "oci":
		if !strings.HasPrefix(scope, "/") {
			return fmt.Errorf("%s is not an absolute path", quote(scope))
		}
		if scope == "/" {
			return errors.New(`"/": write the default scope "" instead`)
		}
		if c := filepath.Clean(scope); c != scope {
			return fmt.Errorf("%s is not a clean path: write %s", quote(scope), quote(c))
		}
	}
	return nil
}
