package config

import (
	"strings"
	"testing"
	"time"
)

// --image-pull-progress-timeout: 1m by default, a positive duration when
// given, anything else refused naming the flag.
func TestImagePullProgressTimeoutFlag(t *testing.T) {
	c, _, err := Load("", Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ImagePullProgressTimeout != time.Minute || c.Origins["imagePullProgressTimeout"] != OriginDefault {
		t.Fatalf("default = %v from %q, want 1m0s from the default", c.ImagePullProgressTimeout, c.Origins["imagePullProgressTimeout"])
	}
	c, _, err = Load("", Flags{HostnameOverride: "n", ImagePullProgressTimeout: "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ImagePullProgressTimeout != 5*time.Second || !strings.Contains(c.Origins["imagePullProgressTimeout"], FlagImagePullProgressTimeout) {
		t.Fatalf("given 5s: %v from %q", c.ImagePullProgressTimeout, c.Origins["imagePullProgressTimeout"])
	}
	for _, bad := range []string{"0s", "-1m", "soon"} {
		if _, _, err := Load("", Flags{HostnameOverride: "n", ImagePullProgressTimeout: bad}); err == nil || !strings.Contains(err.Error(), FlagImagePullProgressTimeout) {
			t.Errorf("%q: err = %v, want it refused naming the flag", bad, err)
		}
	}
}
