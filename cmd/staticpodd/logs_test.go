package main

import (
	"strings"
	"testing"
	"time"
)

// logs' flags become the kubelet API's query, --since in whole seconds
// rounded as kubectl rounds it, at least one.
func TestLogQuery(t *testing.T) {
	for _, tc := range []struct {
		follow, previous, timestamps bool
		tail                         int64
		since                        time.Duration
		want, err                    string
	}{
		{tail: -1, want: ""},
		{follow: true, previous: true, timestamps: true, tail: -1, want: "follow=true&previous=true&timestamps=true"},
		{tail: 0, want: "tailLines=0"},
		{tail: 10, since: 90 * time.Second, want: "sinceSeconds=90&tailLines=10"},
		{tail: -1, since: 1500 * time.Millisecond, want: "sinceSeconds=2"},
		{tail: -1, since: 1400 * time.Millisecond, want: "sinceSeconds=1"},
		{tail: -1, since: 300 * time.Millisecond, want: "sinceSeconds=1"},
		{tail: -2, err: "--tail -2"},
		{tail: -1, since: -time.Second, err: "--since -1s"},
	} {
		q, err := logQuery(tc.follow, tc.previous, tc.timestamps, tc.tail, tc.since)
		switch {
		case tc.err != "":
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%+v: err %v, want %q", tc, err, tc.err)
			}
		case err != nil:
			t.Errorf("%+v: %v", tc, err)
		case q.Encode() != tc.want:
			t.Errorf("%+v: query %q, want %q", tc, q.Encode(), tc.want)
		}
	}
}
