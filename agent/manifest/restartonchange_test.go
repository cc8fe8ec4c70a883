package manifest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func onChangePod(value string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationRestartOnChange: value}}}
}

func TestRestartOnChange(t *testing.T) {
	got, err := RestartOnChange(onChangePod(" /etc/kubernetes/scheduler.conf, /etc/x.conf=hup ,/etc/y=SIGRTMIN+3,/etc/z=15, configmap/cfg,secret/key.pem"))
	want := []WatchedFile{{Path: "/etc/kubernetes/scheduler.conf"}, {Path: "/etc/x.conf", Signal: "SIGHUP"},
		{Path: "/etc/y", Signal: "SIGRTMIN+3"}, {Path: "/etc/z", Signal: "SIGTERM"},
		{Path: "cfg", Kind: "ConfigMap"}, {Path: "key.pem", Kind: "Secret"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v\nwant %+v", got, err, want)
	}
	if got, err := RestartOnChange(&v1.Pod{}); got != nil || err != nil {
		t.Errorf("no annotation: %v %v", got, err)
	}
	for value, want := range map[string]string{
		"":                              "an empty entry",
		"/a,,/b":                        "an empty entry",
		"etc/x":                         "not an absolute, clean path",
		"/etc/../x":                     "not an absolute, clean path",
		"/etc/x/":                       "not an absolute, clean path",
		"/":                             "not an absolute, clean path",
		"/a,/a=HUP":                     "listed twice",
		"/a=SIGNOPE":                    `invalid signal "SIGNOPE"`,
		"/a=0":                          `invalid signal "0"`,
		"/" + strings.Repeat("a", 5000): "more than 4096",
		"configmap/cfg=SIGHUP":          "a ConfigMap restarts the pod when it changes: no signal",
		"secret/Key":                    `"secret/Key": not a Secret name`,
		"configmap/":                    "not a ConfigMap name",
		"secret/a,secret/a":             "listed twice",
	} {
		if _, err := RestartOnChange(onChangePod(value)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: %v, want %q", value, err, want)
		}
	}
}

// 10,000 paths are refused at once, and the problem does not repeat them.
func TestRestartOnChangeTooMany(t *testing.T) {
	value := strings.Repeat("/etc/x,", 9999) + "/etc/x"
	start := time.Now()
	doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    " + AnnotationRestartOnChange + ": " + value +
		"\nspec:\n  containers: [{name: c, image: busybox}]\n"
	parsed := Check([]byte(doc), SourceFile, "/m/p.yaml", "n")
	if len(parsed.Errors) != 1 || !strings.Contains(parsed.Errors[0].Error(), "10000 files, more than 32") {
		t.Fatalf("errors %v", parsed.Errors)
	}
	if msg := parsed.Errors[0].Error(); len(msg) > 1024 {
		t.Errorf("a problem of %d bytes", len(msg))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}
