package objects

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxSize is the most data one ConfigMap or Secret holds, all keys together:
// the API server's MaxSecretSize, which it holds ConfigMaps to as well.
const MaxSize = 1 << 20

// Redacted stands for a Secret's value in an error, as the API server
// writes it: a value is never shown.
const Redacted = "<secret contents redacted>"

// NewConfigMap makes the Object of a ConfigMap a source read from origin,
// defaulted and validated as the API server does (ValidateConfigMap): the
// namespace "default" when none is given, as for the pods of a manifest.
// base is the document's path inside a list (nil for a document of its
// own). The errors name the field; a ConfigMap's values are not secret, but
// none is shown either (only key names).
func NewConfigMap(cm *v1.ConfigMap, source, origin string, base *field.Path) (*Object, field.ErrorList) {
	defaultMeta(&cm.ObjectMeta)
	errs := apivalidation.ValidateObjectMeta(&cm.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, base.Child("metadata"))
	total := 0
	for key, value := range cm.Data {
		errs = append(errs, keyErrors(base.Child("data").Key(key), key)...)
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(base.Child("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		total += len(value)
	}
	for key, value := range cm.BinaryData {
		errs = append(errs, keyErrors(base.Child("binaryData").Key(key), key)...)
		total += len(value)
	}
	if total > MaxSize {
		errs = append(errs, tooLong(base, total))
	}
	if _, ok := cm.Annotations[AnnotationCredentials]; ok {
		errs = append(errs, field.Invalid(base.Child("metadata", "annotations").Key(AnnotationCredentials), "",
			"only a Secret takes values from credentials"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &Object{Source: source, Origin: origin, ConfigMap: cm}, nil
}

// NewSecret makes the Object of a Secret a source read from origin, as the
// API server stores and validates it (ValidateSecret): stringData merged
// into data, overwriting a key of both, the type Opaque when none is given,
// the namespace "default" when none is given. The keys AnnotationCredentials
// names are in Credentials, their values not read yet (Fill). No error
// shows a value: a key whose value is wrong is named, its value is Redacted.
func NewSecret(s *v1.Secret, source, origin string, base *field.Path) (*Object, field.ErrorList) {
	defaultMeta(&s.ObjectMeta)
	if s.Type == "" {
		s.Type = v1.SecretTypeOpaque
	}
	errs := apivalidation.ValidateObjectMeta(&s.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, base.Child("metadata"))
	// stringData's keys are checked where they are written; the API
	// server names them under data, once merged.
	for key := range s.StringData {
		errs = append(errs, keyErrors(base.Child("stringData").Key(key), key)...)
	}
	for key := range s.Data {
		if _, ok := s.StringData[key]; !ok {
			errs = append(errs, keyErrors(base.Child("data").Key(key), key)...)
		}
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	creds, credErrs := ParseCredentials(s.Annotations[AnnotationCredentials], base.Child("metadata", "annotations").Key(AnnotationCredentials))
	errs = append(errs, credErrs...)
	for _, key := range sortedKeys(creds) {
		if _, ok := s.Data[key]; ok {
			// One value per key: which of the two a pod gets would be a
			// rule nobody reads.
			errs = append(errs, field.Invalid(base.Child("data").Key(key), key,
				fmt.Sprintf("also taken from credential %q by annotation %s: give the key in one place", creds[key], AnnotationCredentials)))
		}
	}
	if n := dataSize(s.Data); n > MaxSize {
		errs = append(errs, tooLong(base.Child("data"), n))
	}
	errs = append(errs, typeErrors(s, creds, base)...)
	if len(errs) > 0 {
		return nil, errs
	}
	return &Object{Source: source, Origin: origin, Secret: s, Credentials: creds}, nil
}

func defaultMeta(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
}

func keyErrors(p *field.Path, key string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(p, key, msg))
	}
	return errs
}

// tooLong is the API server's error for data over MaxSize, with the size.
func tooLong(p *field.Path, n int) *field.Error {
	e := field.TooLong(p, "", MaxSize)
	e.Detail += fmt.Sprintf(" (the values are %d bytes together)", n)
	return e
}

func dataSize(data map[string][]byte) int {
	n := 0
	for _, v := range data {
		n += len(v)
	}
	return n
}

// typeErrors are the API server's rules for the Secret's type: the keys it
// must have, well-formed JSON for a registry's credentials. A key taken
// from a credential counts as present; its value is checked by Fill.
func typeErrors(s *v1.Secret, creds map[string]string, base *field.Path) field.ErrorList {
	data := base.Child("data")
	has := func(key string) bool {
		_, inData := s.Data[key]
		_, inCreds := creds[key]
		return inData || inCreds
	}
	var errs field.ErrorList
	switch s.Type {
	case v1.SecretTypeServiceAccountToken:
		if s.Annotations[v1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(base.Child("metadata", "annotations").Key(v1.ServiceAccountNameKey), ""))
		}
	case v1.SecretTypeDockercfg, v1.SecretTypeDockerConfigJson:
		key := v1.DockerConfigKey
		if s.Type == v1.SecretTypeDockerConfigJson {
			key = v1.DockerConfigJsonKey
		}
		if !has(key) {
			errs = append(errs, field.Required(data.Key(key), ""))
		} else if value, ok := s.Data[key]; ok {
			if err := json.Unmarshal(value, &map[string]any{}); err != nil {
				errs = append(errs, field.Invalid(data.Key(key), Redacted, jsonError(err)))
			}
		}
	case v1.SecretTypeBasicAuth:
		if !has(v1.BasicAuthUsernameKey) && !has(v1.BasicAuthPasswordKey) {
			errs = append(errs, field.Required(data.Key(v1.BasicAuthUsernameKey), ""),
				field.Required(data.Key(v1.BasicAuthPasswordKey), ""))
		}
	case v1.SecretTypeSSHAuth:
		if _, fromCred := creds[v1.SSHAuthPrivateKey]; !fromCred && len(s.Data[v1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(v1.SSHAuthPrivateKey), ""))
		}
	case v1.SecretTypeTLS:
		for _, key := range []string{v1.TLSCertKey, v1.TLSPrivateKeyKey} {
			if !has(key) {
				errs = append(errs, field.Required(data.Key(key), ""))
			}
		}
	}
	return errs
}

// jsonError says what is wrong with a JSON value without quoting it:
// encoding/json's syntax errors name an offset only, but its type errors
// may name a value ("cannot unmarshal string into ...").
func jsonError(err error) string {
	if se, ok := err.(*json.SyntaxError); ok {
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	}
	return "not a JSON object"
}

// maxCredentialName is the longest credential name systemd takes
// (CREDENTIAL_NAME_MAX, a file name).
const maxCredentialName = 255

// ParseCredentials reads the value of AnnotationCredentials, at p:
// comma-separated key=credential-name pairs, spaces around a pair or its
// parts ignored. Each key must be a valid data key and be named once; each
// credential name must be one systemd takes and name a file directly in
// $CREDENTIALS_DIRECTORY: printable ASCII without '/' or ':', not "." or
// "..", at most 255 bytes (',', '=' and spaces cannot be written here).
// An empty value names no key.
func ParseCredentials(value string, p *field.Path) (map[string]string, field.ErrorList) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var errs field.ErrorList
	creds := map[string]string{}
	for i, pair := range strings.Split(value, ",") {
		pair = strings.TrimSpace(pair)
		key, name, ok := strings.Cut(pair, "=")
		key, name = strings.TrimSpace(key), strings.TrimSpace(name)
		switch {
		case !ok:
			errs = append(errs, field.Invalid(p, pair, fmt.Sprintf("pair %d is not key=credential-name", i+1)))
			continue
		case key == "":
			errs = append(errs, field.Invalid(p, pair, fmt.Sprintf("pair %d has no key", i+1)))
			continue
		}
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(p, key, "key: "+msg))
		}
		if msg := credentialNameError(name); msg != "" {
			errs = append(errs, field.Invalid(p, name, fmt.Sprintf("credential of key %q: %s", key, msg)))
		}
		if prev, dup := creds[key]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s (credentials %q and %q)", key, prev, name)))
			continue
		}
		creds[key] = name
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return creds, nil
}

// ValidCredentialName reports whether name can name a credential file.
func ValidCredentialName(name string) bool { return credentialNameError(name) == "" }

func credentialNameError(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case name == "." || name == "..":
		return "must not be \".\" or \"..\""
	case len(name) > maxCredentialName:
		return fmt.Sprintf("must be at most %d bytes", maxCredentialName)
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || c == '/' || c == ':' || c == ',' || c == '=' {
			return "must be printable ASCII without spaces, '/', ':', ',' or '='"
		}
	}
	return ""
}

// Fill returns a copy of the Secret o with each credential's value under its
// key, read by read (the caller's: it reads $CREDENTIALS_DIRECTORY/name,
// at most limit bytes, and fails beyond). The values of one Secret are at
// most MaxSize together, data included, and follow the type's rules. o is
// returned as it is when it takes no credential. The error names the
// Secret, the key and the credential, never a value; on error nothing of
// the Secret may be used.
func Fill(o *Object, read func(name string, limit int64) ([]byte, error)) (*Object, error) {
	if o.Secret == nil || len(o.Credentials) == 0 {
		return o, nil
	}
	s := o.Secret.DeepCopy()
	if s.Data == nil {
		s.Data = make(map[string][]byte, len(o.Credentials))
	}
	left := int64(MaxSize - dataSize(s.Data))
	for _, key := range sortedKeys(o.Credentials) {
		name := o.Credentials[key]
		value, err := read(name, left)
		if err != nil {
			return nil, fmt.Errorf("Secret %s/%s: key %q: credential %q: %w", s.Namespace, s.Name, key, name, err)
		}
		if left -= int64(len(value)); left < 0 {
			return nil, fmt.Errorf("Secret %s/%s: key %q: credential %q: the Secret's values would be more than %d bytes together",
				s.Namespace, s.Name, key, name, MaxSize)
		}
		s.Data[key] = value
	}
	if errs := typeErrors(s, nil, nil); len(errs) > 0 {
		return nil, fmt.Errorf("Secret %s/%s: with its credentials' values: %w", s.Namespace, s.Name, errs.ToAggregate())
	}
	out := *o
	out.Secret = s
	return &out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
