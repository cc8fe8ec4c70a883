package spec

import (
	"reflect"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestWithCapabilities(t *testing.T) {
	tests := []struct {
		caps []string
		want []string
	}{
		{caps: []string{"CAP_KILL"}, want: []string{"CAP_KILL"}},
		{caps: nil, want: []string{}},
	}
	for _, tt := range tests {
		s := Default()
		s.Process.Capabilities.Inheritable = []string{"CAP_KILL"}
		if err := WithCapabilities(tt.caps)(s); err != nil {
			t.Fatal(err)
		}
		want := &specs.LinuxCapabilities{Bounding: tt.want, Effective: tt.want, Permitted: tt.want}
		if !reflect.DeepEqual(s.Process.Capabilities, want) {
			t.Errorf("WithCapabilities(%q) = %+v, want %+v", tt.caps, s.Process.Capabilities, want)
		}
	}
}

func TestWithCapabilityChanges(t *testing.T) {
	all, err := currentCaps()
	if err != nil {
		t.Fatal(err)
	}
	without := func(caps []string, drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return slices.Contains(drop, c) })
	}
	tests := []struct {
		name       string
		add, drop  []string
		want       []string
		wantErr    string
		checkOrder bool
	}{
		{name: "none: docker defaults", want: DefaultCapabilities, checkOrder: true},
		{name: "add without prefix", add: []string{"NET_ADMIN"}, want: append(slices.Clone(DefaultCapabilities), "CAP_NET_ADMIN"), checkOrder: true},
		{name: "add with prefix, lower case", add: []string{"cap_sys_time"}, want: append(slices.Clone(DefaultCapabilities), "CAP_SYS_TIME"), checkOrder: true},
		{name: "add one already there", add: []string{"KILL"}, want: DefaultCapabilities, checkOrder: true},
		{name: "drop both spellings", drop: []string{"NET_RAW", "CAP_MKNOD"}, want: without(DefaultCapabilities, "CAP_NET_RAW", "CAP_MKNOD"), checkOrder: true},
		{name: "drop ALL", drop: []string{"ALL"}, want: []string{}},
		{name: "drop ALL, add one", add: []string{"NET_BIND_SERVICE"}, drop: []string{"ALL"}, want: []string{"CAP_NET_BIND_SERVICE"}},
		{name: "add ALL", add: []string{"ALL"}, want: all},
		{name: "add ALL, drop one", add: []string{"ALL"}, drop: []string{"CHOWN"}, want: without(all, "CAP_CHOWN")},
		{name: "add ALL and drop ALL: none", add: []string{"ALL"}, drop: []string{"all"}, want: []string{}},
		{name: "drop wins over add", add: []string{"NET_ADMIN"}, drop: []string{"NET_ADMIN"}, want: DefaultCapabilities},
		{name: "unknown add", add: []string{"FLY"}, wantErr: `capabilities.add: unknown capability "FLY"`},
		{name: "unknown drop", drop: []string{"CAP_NOPE"}, wantErr: `capabilities.drop: unknown capability "CAP_NOPE"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			err := WithCapabilityChanges(tt.add, tt.drop)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			c := s.Process.Capabilities
			for setName, got := range map[string][]string{"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted} {
				if !sameSet(got, tt.want) || (tt.checkOrder && !reflect.DeepEqual(got, tt.want)) {
					t.Errorf("%s = %q, want %q", setName, got, tt.want)
				}
			}
			if len(c.Inheritable) != 0 || len(c.Ambient) != 0 {
				t.Errorf("inheritable %q, ambient %q: want none", c.Inheritable, c.Ambient)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
