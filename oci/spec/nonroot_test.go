package spec

import (
	"reflect"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestWithRunAsNonRoot(t *testing.T) {
	id := func(v int64) *int64 { return &v }
	tests := []struct {
		name      string
		runAsUser *int64
		imageUser string
		wantErr   string
	}{
		{name: "image without user is root", wantErr: "container has runAsNonRoot and image will run as root"},
		{name: "image uid 0", imageUser: "0", wantErr: "image will run as root"},
		{name: "image uid 0 with group", imageUser: "0:1000", wantErr: "image will run as root"},
		{name: "image group only", imageUser: ":1000", wantErr: "image will run as root"},
		{name: "image name root", imageUser: "root", wantErr: "container has runAsNonRoot and image has non-numeric user (root), cannot verify user is non-root"},
		{name: "image name not root", imageUser: "app:app", wantErr: "image has non-numeric user (app)"},
		{name: "image uid too large", imageUser: "4294967296", wantErr: "image has an invalid user id (4294967296)"},
		{name: "image uid", imageUser: "1000"},
		{name: "image uid with group 0", imageUser: "1000:0"},
		{name: "runAsUser 0", runAsUser: id(0), imageUser: "1000", wantErr: "container's runAsUser breaks non-root policy"},
		{name: "runAsUser over root image", runAsUser: id(1000)},
		{name: "runAsUser over named image", runAsUser: id(1000), imageUser: "app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			before := Default()
			err := WithRunAsNonRoot(tt.runAsUser, tt.imageUser)(s)
			checkErr(t, err, tt.wantErr)
			if !reflect.DeepEqual(s, before) {
				t.Errorf("spec changed: %+v", s.Process)
			}
		})
	}
}

// runAsNonRoot reaches the check through Generate, and only when set.
func TestGenerateRunAsNonRoot(t *testing.T) {
	rootfs := testRootfs(t)
	img := busybox // no User: root
	nonRoot := &podspec.Container{Name: "app", Security: podspec.Security{RunAsNonRoot: true}}
	_, err := Generate(testPod(), nonRoot, img, rootfs, testSandbox())
	checkErr(t, err, `container "app" of pod web-node1: container has runAsNonRoot and image will run as root`)

	if _, err := Generate(testPod(), &podspec.Container{Name: "app"}, img, rootfs, testSandbox()); err != nil {
		t.Errorf("root image without runAsNonRoot: %v", err)
	}
	img.User = "1000"
	s, err := Generate(testPod(), nonRoot, img, rootfs, testSandbox())
	if err != nil {
		t.Fatalf("uid 1000 image with runAsNonRoot: %v", err)
	}
	if s.Process.User.UID != 1000 {
		t.Errorf("uid = %d, want 1000", s.Process.User.UID)
	}
}
