package config

import (
	"maps"
	"reflect"
	"slices"
	"testing"
)

// liveGroups are the groups a reload applies live.
var liveGroups = []Reload{ReloadSources, ReloadEviction, ReloadLogs, ReloadImageGC}

// Every field of Config but Origins and kubelet is declared by exactly one row of the
// table, so that none escapes loading, display, validation or reload.
func TestEveryConfigFieldHasOneRow(t *testing.T) {
	c := &Config{}
	rows := map[uintptr][]string{}
	keys := map[string]bool{}
	for _, f := range fields {
		if keys[f.key] {
			t.Errorf("key %s has two rows", f.key)
		}
		keys[f.key] = true
		rows[reflect.ValueOf(f.value.addr(c)).Pointer()] = append(rows[reflect.ValueOf(f.value.addr(c)).Pointer()], f.key)
	}
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "Origins" || name == "kubelet" {
			continue
		}
		if got := rows[v.Field(i).Addr().Pointer()]; len(got) != 1 {
			t.Errorf("Config.%s has rows %v, want one", name, got)
		}
	}
}

// A flag or environment variable whose row has no parser sets a string.
func TestFlagsAndEnvSetTheirValue(t *testing.T) {
	for _, f := range fields {
		c := &Config{}
		if f.flagValue != nil && f.parseFlag == nil && !f.byLoad && !f.value.setString(c, "x") {
			t.Errorf("--%s (%s) sets no string and has no parseFlag", f.flag, f.key)
		}
		if f.env != "" && !f.value.setString(c, "x") {
			t.Errorf("%s (%s) sets no string", f.env, f.key)
		}
		if f.flagList != nil && f.parseList == nil {
			t.Errorf("--%s (%s) is a list without parseList", f.flag, f.key)
		}
	}
}

func TestReloadOf(t *testing.T) {
	if g := ReloadOf("noSuchField"); g != Restart {
		t.Errorf("ReloadOf(noSuchField) = %v, want Restart", g)
	}
	if keys := LiveFields(Restart); keys != nil {
		t.Errorf("LiveFields(Restart) = %v, want none", keys)
	}
	for _, g := range liveGroups {
		keys := LiveFields(g)
		if len(keys) == 0 {
			t.Errorf("group %d has no field", g)
		}
		for _, k := range keys {
			if ReloadOf(k) != g {
				t.Errorf("ReloadOf(%s) = %v, want %v", k, ReloadOf(k), g)
			}
		}
	}
}

// liveChanges changes every live field from its default, and one field that
// needs a restart.
const liveChanges = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /srv/manifests
staticPodURL: http://example.com/pods
staticPodURLHeader: {Authorization: ["Bearer x"]}
fileCheckFrequency: 3s
httpCheckFrequency: 4s
evictionHard: {memory.available: 1Gi}
evictionSoft: {memory.available: 2Gi}
evictionSoftGracePeriod: {memory.available: 1m}
evictionMinimumReclaim: {memory.available: 10Mi}
evictionPressureTransitionPeriod: 1m
evictionMaxPodGracePeriod: 10
containerLogMaxSize: 1Mi
containerLogMaxFiles: 3
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
imageMinimumGCAge: 1m
imageMaximumGCAge: 1h
podPidsLimit: 100
`

// CopyLive takes every live field, value and origin, from the new
// configuration and nothing else: a field marked live that it did not copy
// would be logged as applied and keep its old value.
func TestCopyLive(t *testing.T) {
	old, _, err := Load("", Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	newc, _, err := Load(write(t, liveChanges), Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	changed := Changed(old, newc)
	var live []string
	for _, g := range liveGroups {
		live = append(live, LiveFields(g)...)
	}
	for _, k := range live {
		if !slices.Contains(changed, k) {
			t.Errorf("the test's configuration does not change live field %s: add it to liveChanges", k)
		}
	}
	if !slices.Contains(changed, "podPidsLimit") {
		t.Fatalf("changed = %v, want podPidsLimit among them", changed)
	}

	next := *old
	next.Origins = maps.Clone(old.Origins)
	CopyLive(&next, newc)
	for _, f := range fields {
		got := reflect.ValueOf(f.value.addr(&next)).Elem().Interface()
		want := reflect.ValueOf(f.value.addr(old)).Elem().Interface()
		wantOrigin := old.Origins[f.key]
		if f.reload != Restart {
			want = reflect.ValueOf(f.value.addr(newc)).Elem().Interface()
			wantOrigin = newc.Origins[f.key]
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s (%v) after CopyLive = %v, want %v", f.key, f.reload, got, want)
		}
		if next.Origins[f.key] != wantOrigin {
			t.Errorf("origin of %s after CopyLive = %q, want %q", f.key, next.Origins[f.key], wantOrigin)
		}
	}
	// configFile differs too: the old configuration has none.
	if got := Changed(&next, newc); !slices.Equal(got, []string{"configFile", "podPidsLimit"}) {
		t.Errorf("after CopyLive, changed = %v, want only the fields that need a restart", got)
	}
}

// LiveGroups are the groups of the table's live fields, each once; ChangedIn
// says of a group what Changed and ReloadOf say of its fields.
func TestLiveGroupsAndChangedIn(t *testing.T) {
	if got := LiveGroups(); !slices.Equal(got, liveGroups) {
		t.Errorf("LiveGroups() = %v, want %v", got, liveGroups)
	}
	old, _, err := Load("", Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range liveGroups {
		if ChangedIn(old, old, g) {
			t.Errorf("ChangedIn(old, old, %v) = true", g)
		}
		for _, k := range LiveFields(g) {
			newc, _, err := Load("", Flags{HostnameOverride: "n"})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fields {
				if f.key == k {
					f.value.copy(newc, mustLoad(t, liveChanges))
				}
			}
			for _, other := range liveGroups {
				if got := ChangedIn(old, newc, other); got != (other == g) {
					t.Errorf("%s changed: ChangedIn(%v) = %v", k, other, got)
				}
			}
		}
	}
}

func mustLoad(t *testing.T, file string) *Config {
	t.Helper()
	c, _, err := Load(write(t, file), Flags{HostnameOverride: "n"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
