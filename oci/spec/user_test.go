package spec

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

const testPasswd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
app:x:1000:1000:app:/home/app:/bin/sh
`

const testGroup = `root:x:0:
daemon:x:1:
wheel:x:10:app,other
audio:x:29:app
app:x:1000:
staff:x:50:
`

// testRootfs makes a rootfs with /etc/passwd and /etc/group.
func testRootfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"passwd": testPasswd, "group": testGroup} {
		if err := os.WriteFile(filepath.Join(root, "etc", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestWithUser(t *testing.T) {
	withFiles := testRootfs(t)
	empty := t.TempDir()
	id := func(v int64) *int64 { return &v }
	tests := []struct {
		name       string
		rootfs     string
		runAsUser  *int64
		runAsGroup *int64
		imageUser  string
		sup        []int64
		want       specs.User
		wantErr    string
	}{
		{name: "no user is root", rootfs: withFiles, want: specs.User{UID: 0, GID: 0, AdditionalGids: []uint32{0}}},
		{name: "image name", rootfs: withFiles, imageUser: "app", want: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 10, 29}}},
		{name: "image uid in passwd", rootfs: withFiles, imageUser: "1000", want: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 10, 29}}},
		{name: "image uid not in passwd", rootfs: withFiles, imageUser: "4242", want: specs.User{UID: 4242, GID: 0, AdditionalGids: []uint32{0}}},
		{name: "image uid:gid", rootfs: withFiles, imageUser: "1000:50", want: specs.User{UID: 1000, GID: 50, AdditionalGids: []uint32{50, 10, 29}}},
		{name: "image name:group", rootfs: withFiles, imageUser: "daemon:staff", want: specs.User{UID: 1, GID: 50, AdditionalGids: []uint32{50}}},
		{name: "runAsUser over image", rootfs: withFiles, runAsUser: id(1), imageUser: "app", want: specs.User{UID: 1, GID: 1, AdditionalGids: []uint32{1}}},
		{name: "runAsUser and runAsGroup", rootfs: withFiles, runAsUser: id(1000), runAsGroup: id(7), want: specs.User{UID: 1000, GID: 7, AdditionalGids: []uint32{7, 10, 29}}},
		{name: "runAsGroup over image user", rootfs: withFiles, runAsGroup: id(7), imageUser: "app:staff", want: specs.User{UID: 1000, GID: 7, AdditionalGids: []uint32{7, 10, 29}}},
		{name: "supplementalGroups appended once", rootfs: withFiles, runAsUser: id(1000), sup: []int64{5, 10, 5}, want: specs.User{UID: 1000, GID: 1000, AdditionalGids: []uint32{1000, 10, 29, 5}}},
		{name: "numeric without passwd", rootfs: empty, imageUser: "123:456", want: specs.User{UID: 123, GID: 456, AdditionalGids: []uint32{456}}},
		{name: "runAsUser without passwd", rootfs: empty, runAsUser: id(65534), want: specs.User{UID: 65534, GID: 0, AdditionalGids: []uint32{0}}},
		{name: "unknown name", rootfs: withFiles, imageUser: "nobody", wantErr: `image User "nobody"`},
		{name: "name without passwd", rootfs: empty, imageUser: "app", wantErr: `image User "app"`},
		{name: "unknown group", rootfs: withFiles, imageUser: "app:nogroup", wantErr: `image User "nogroup"`},
		{name: "negative runAsUser", rootfs: withFiles, runAsUser: id(-1), wantErr: "runAsUser"},
		{name: "negative supplemental group", rootfs: withFiles, sup: []int64{-3}, wantErr: "supplementalGroups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			err := WithUser(tt.rootfs, tt.runAsUser, tt.runAsGroup, tt.imageUser, tt.sup)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(s.Process.User, tt.want) {
				t.Errorf("user = %+v, want %+v", s.Process.User, tt.want)
			}
		})
	}
}

// A symlinked /etc/passwd is resolved inside the rootfs, never on the host.
func TestWithUserSymlinkStaysInRootfs(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "data", "passwd"), []byte("svc:x:77:77::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Absolute target: must mean <root>/data/passwd, not the host's /data/passwd.
	if err := os.Symlink("/data/passwd", filepath.Join(root, "etc", "passwd")); err != nil {
		t.Fatal(err)
	}
	s := Default()
	if err := WithUser(root, nil, nil, "svc", nil)(s); err != nil {
		t.Fatal(err)
	}
	if s.Process.User.UID != 77 || s.Process.User.GID != 77 {
		t.Errorf("user = %+v, want uid 77 gid 77", s.Process.User)
	}
}
