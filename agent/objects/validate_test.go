package objects

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const canary = "canary-0f1e2d3c"

func errStrings(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

func TestNewConfigMap(t *testing.T) {
	for _, tc := range []struct {
		name string
		cm   v1.ConfigMap
		want []string // substrings of the errors, in any order; none: valid
	}{
		{name: "valid", cm: v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"a.conf": "x"}, BinaryData: map[string][]byte{"b": {0}}}},
		{name: "no name", cm: v1.ConfigMap{}, want: []string{"metadata.name: Required value"}},
		{name: "bad name", cm: v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Cfg_1"}}, want: []string{"metadata.name: Invalid value"}},
		{name: "bad namespace", cm: v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "a.b"}}, want: []string{"metadata.namespace: Invalid value"}},
		{name: "bad keys", cm: v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"../x": "", "a/b": "", ".": ""}},
			want: []string{`data[../x]: Invalid value: "../x"`, `data[a/b]: Invalid value: "a/b"`, `data[.]: Invalid value: "."`}},
		{name: "key in both", cm: v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": ""}, BinaryData: map[string][]byte{"k": nil}},
			want: []string{"data[k]: Invalid value: \"k\": duplicate of key present in binaryData"}},
		{name: "huge", cm: v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": strings.Repeat("x", MaxSize)}, BinaryData: map[string][]byte{"b": {1}}},
			want: []string{"Too long: may not be more than 1048576 bytes (the values are 1048577 bytes together)"}},
		{name: "credentials on a ConfigMap", cm: v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{AnnotationCredentials: "a=b"}}},
			want: []string{"only a Secret takes values from credentials"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, errs := NewConfigMap(&tc.cm, "file", "/m/c.yaml", nil)
			checkErrs(t, errs, tc.want)
			if len(tc.want) == 0 && (o == nil || o.Namespace() != "default" || o.Kind() != "ConfigMap" || o.Origin != "/m/c.yaml") {
				t.Fatalf("object %+v, want one in namespace default from /m/c.yaml", o)
			}
		})
	}
}

func checkErrs(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := errStrings(errs)
	if len(want) == 0 && len(errs) > 0 {
		t.Fatalf("errors:\n%s\nwant none", got)
	}
	if len(want) > 0 && len(errs) == 0 {
		t.Fatalf("no error, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("errors:\n%s\nwant one with %q", got, w)
		}
	}
}

func secret(typ v1.SecretType, data map[string]string, annotations map[string]string) *v1.Secret {
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Annotations: annotations}, Type: typ}
	for k, v := range data {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[k] = []byte(v)
	}
	return s
}

func creds(v string) map[string]string { return map[string]string{AnnotationCredentials: v} }

func TestNewSecret(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     *v1.Secret
		want  []string
		creds map[string]string // when valid
	}{
		{name: "opaque", s: secret("", map[string]string{"a": canary}, nil)},
		{name: "bad key", s: secret("", map[string]string{"a/b": canary}, nil), want: []string{`data[a/b]: Invalid value: "a/b"`}},
		{name: "huge", s: secret("", map[string]string{"a": strings.Repeat("x", MaxSize+1)}, nil), want: []string{"data: Too long"}},
		{name: "tls missing key", s: secret(v1.SecretTypeTLS, map[string]string{"tls.crt": canary}, nil), want: []string{"data[tls.key]: Required value"}},
		{name: "tls key from credential", s: secret(v1.SecretTypeTLS, map[string]string{"tls.crt": canary}, creds("tls.key=apiserver.key")),
			creds: map[string]string{"tls.key": "apiserver.key"}},
		{name: "dockerconfigjson not JSON", s: secret(v1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": canary}, nil),
			want: []string{`data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": not valid JSON`}},
		{name: "dockerconfigjson a string", s: secret(v1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": `"` + canary + `"`}, nil),
			want: []string{"not a JSON object"}},
		{name: "dockercfg missing", s: secret(v1.SecretTypeDockercfg, nil, nil), want: []string{"data[.dockercfg]: Required value"}},
		{name: "basic auth", s: secret(v1.SecretTypeBasicAuth, nil, nil), want: []string{"data[username]: Required value", "data[password]: Required value"}},
		{name: "basic auth password only", s: secret(v1.SecretTypeBasicAuth, map[string]string{"password": ""}, nil)},
		{name: "ssh empty", s: secret(v1.SecretTypeSSHAuth, map[string]string{"ssh-privatekey": ""}, nil), want: []string{"data[ssh-privatekey]: Required value"}},
		{name: "service account token", s: secret(v1.SecretTypeServiceAccountToken, nil, nil), want: []string{"kubernetes.io/service-account.name"}},
		{name: "custom type", s: secret("example.com/x", nil, nil)},
		{name: "credentials", s: secret("", map[string]string{"a": canary}, creds(" b = cred.b ,c=c@1")), creds: map[string]string{"b": "cred.b", "c": "c@1"}},
		{name: "credential and data", s: secret("", map[string]string{"a": canary}, creds("a=x")), want: []string{`data[a]: Invalid value: "a": also taken from credential "x"`}},
		{name: "credential ..", s: secret("", nil, creds("a=..")), want: []string{`Invalid value: "..": credential of key "a": must not be`}},
		{name: "credential .", s: secret("", nil, creds("a=.")), want: []string{`credential of key "a": must not be`}},
		{name: "credential path", s: secret("", nil, creds("a=../x")), want: []string{`Invalid value: "../x": credential of key "a"`}},
		{name: "credential slash", s: secret("", nil, creds("a=a/b")), want: []string{`Invalid value: "a/b"`}},
		{name: "credential empty", s: secret("", nil, creds("a=")), want: []string{"must not be empty"}},
		{name: "credential control", s: secret("", nil, creds("a=x\ny")), want: []string{"printable ASCII"}},
		{name: "credential too long", s: secret("", nil, creds("a="+strings.Repeat("x", 256))), want: []string{"at most 255 bytes"}},
		{name: "credential bad key", s: secret("", nil, creds("a/b=x")), want: []string{`Invalid value: "a/b": key: `}},
		{name: "credential no =", s: secret("", nil, creds("a=x,b")), want: []string{"pair 2 is not key=credential-name"}},
		{name: "credential no key", s: secret("", nil, creds("=x")), want: []string{"pair 1 has no key"}},
		{name: "credential empty pair", s: secret("", nil, creds("a=x,,b=y")), want: []string{"pair 2 is not key=credential-name"}},
		{name: "credential key twice", s: secret("", nil, creds("a=x,a=y")), want: []string{`Duplicate value: "a (credentials \"x\" and \"y\")"`}},
		{name: "credential empty annotation", s: secret("", nil, creds(" "))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, errs := NewSecret(tc.s, "file", "/m/s.yaml", nil)
			checkErrs(t, errs, tc.want)
			if got := errStrings(errs); strings.Contains(got, canary) {
				t.Errorf("errors show the secret's value:\n%s", got)
			}
			if len(tc.want) > 0 {
				return
			}
			if o.Namespace() != "default" || o.Secret.Type == "" {
				t.Errorf("namespace %q type %q, want default and a type", o.Namespace(), o.Secret.Type)
			}
			if fmt.Sprint(o.Credentials) != fmt.Sprint(tc.creds) {
				t.Errorf("credentials %v, want %v", o.Credentials, tc.creds)
			}
		})
	}
}

// stringData is merged into data, its keys winning, as the API server's
// conversion does; its keys are checked where they are written.
func TestNewSecretStringData(t *testing.T) {
	s := secret("", map[string]string{"a": "from data", "b": "b"}, nil)
	s.StringData = map[string]string{"a": "from stringData", "c": "c"}
	o, errs := NewSecret(s, "file", "/m/s.yaml", nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := fmt.Sprintf("%s %s %s %v", o.Secret.Data["a"], o.Secret.Data["b"], o.Secret.Data["c"], o.Secret.StringData); got != "from stringData b c map[]" {
		t.Errorf("data %q", got)
	}

	s = secret("", nil, nil)
	s.StringData = map[string]string{"x y": canary}
	_, errs = NewSecret(s, "file", "/m/s.yaml", field.NewPath("items").Index(2))
	checkErrs(t, errs, []string{`items[2].stringData[x y]: Invalid value: "x y"`})

	// Together over the limit, each under it.
	s = secret("", map[string]string{"a": strings.Repeat("x", MaxSize/2+1)}, nil)
	s.StringData = map[string]string{"b": strings.Repeat("x", MaxSize/2)}
	_, errs = NewSecret(s, "file", "/m/s.yaml", nil)
	checkErrs(t, errs, []string{"data: Too long"})
}

func TestFill(t *testing.T) {
	files := map[string]string{"k": canary, "big": strings.Repeat("x", MaxSize), "json": `{"auths":{}}`}
	read := func(name string, limit int64) ([]byte, error) {
		v, ok := files[name]
		if !ok {
			return nil, fs.ErrNotExist
		}
		if int64(len(v)) > limit {
			return nil, errors.New("larger than the limit")
		}
		return []byte(v), nil
	}
	mk := func(typ v1.SecretType, data map[string]string, c string) *Object {
		o, errs := NewSecret(secret(typ, data, creds(c)), "file", "/m/s.yaml", nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		return o
	}

	o := mk("", map[string]string{"a": "1"}, "b=k")
	filled, err := Fill(o, read)
	if err != nil {
		t.Fatal(err)
	}
	if string(filled.Secret.Data["b"]) != canary || string(filled.Secret.Data["a"]) != "1" {
		t.Errorf("filled data %q", filled.Secret.Data)
	}
	if _, ok := o.Secret.Data["b"]; ok {
		t.Error("Fill changed the object it was given")
	}

	for _, tc := range []struct {
		name string
		o    *Object
		want string
	}{
		{"missing", mk("", nil, "b=nope"), `Secret default/s: key "b": credential "nope": file does not exist`},
		{"over the limit with data", mk("", map[string]string{"a": "1"}, "b=big"), `Secret default/s: key "b": credential "big": larger than the limit`},
		{"over the limit together", mk("", nil, "a=big,b=k"), `key "b": credential "k": larger than the limit`},
		{"type rules on credentials", mk(v1.SecretTypeDockerConfigJson, nil, ".dockerconfigjson=k"), `with its credentials' values: data[.dockerconfigjson]: Invalid value: "<secret contents redacted>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Fill(tc.o, read)
			if err == nil || got != nil {
				t.Fatalf("Fill = %v, %v; want an error", got, err)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), canary) {
				t.Errorf("error %q, want %q and no value", err, tc.want)
			}
		})
	}
	if got, err := Fill(mk(v1.SecretTypeDockerConfigJson, nil, ".dockerconfigjson=json"), read); err != nil || len(got.Secret.Data[".dockerconfigjson"]) == 0 {
		t.Errorf("Fill of a valid registry credential = %v, %v", got, err)
	}
	plain := mk("", nil, "")
	if got, err := Fill(plain, read); got != plain || err != nil {
		t.Errorf("Fill of a Secret without credentials = %v, %v; want it as it is", got, err)
	}
}
