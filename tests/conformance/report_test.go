package conformance

import (
	"slices"
	"testing"
)

func TestParseReport(t *testing.T) {
	got := ParseReport(`# id
uid 1000
groups 3000 2000
# env
CFG_app.properties=mode=fast~level=3~
EXPANDED=color=blue
# /etc/settings
./ drwxrwsrwt 0:2000
./..2026_12_05_12_20_11.123456789/ drwxr-sr-x 0:2000
./..2026_12_05_12_20_11.123456789/color -rw-r--r-- 0:2000 4
  | blue
  |
./..data -> ..2026_12_05_12_20_11.123456789
# mounts
/etc/settings ext4
`)
	want := []Field{
		{"id uid", "1000"},
		{"id groups", "3000 2000"},
		{"env CFG_app.properties", "mode=fast~level=3~"},
		{"env EXPANDED", "color=blue"},
		{"/etc/settings ./", "drwxrwsrwt 0:2000"},
		{"/etc/settings ./..<timestamp>/", "drwxr-sr-x 0:2000"},
		{"/etc/settings ./..<timestamp>/color", "-rw-r--r-- 0:2000 4\n| blue\n|"},
		{"/etc/settings ./..data", "-> ..<timestamp>"},
		{"mounts /etc/settings", "ext4"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ParseReport:\n%q\nwant\n%q", got, want)
	}
}
