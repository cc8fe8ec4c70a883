package source

import (
	"context"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// fakeSource sends one update naming itself, then runs until cancelled, and
// says when it ended.
func fakeSource(name, key string, ended chan<- string) *Running {
	return &Running{
		Key: key,
		Run: func(ctx context.Context, out chan<- Update) error {
			defer func() { ended <- key }()
			select {
			case out <- Update{Source: name, Problems: []manifest.Problem{{Origin: key}}}:
			case <-ctx.Done():
				return nil
			}
			<-ctx.Done()
			return nil
		},
		Relist: func() {},
	}
}

func nextUpdate(t *testing.T, updates <-chan Update) Update {
	t.Helper()
	select {
	case u := <-updates:
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update")
		return Update{}
	}
}

// A reload's sources: the same key keeps the running source; a new key
// stops the old one before the new one's first update; a removed source
// leaves an empty set; one removed before run leaves it at run.
func TestMux(t *testing.T) {
	ended := make(chan string, 10)
	s := NewMux()
	s.Set(manifest.SourceFile, fakeSource(manifest.SourceFile, "a", ended))
	s.Set(manifest.SourceHTTP, fakeSource(manifest.SourceHTTP, "u", ended))
	s.Set(manifest.SourceHTTP, nil) // removed before run
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates := make(chan Update)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, updates) }()
	got := map[string]string{}
	for range 2 {
		u := nextUpdate(t, updates)
		origin := ""
		if len(u.Problems) > 0 {
			origin = u.Problems[0].Origin
		}
		got[u.Source] = origin
	}
	if got[manifest.SourceFile] != "a" || got[manifest.SourceHTTP] != "" {
		t.Fatalf("first updates %v, want the file source's and the removed URL's empty set", got)
	}

	if kept := s.Set(manifest.SourceFile, fakeSource(manifest.SourceFile, "a", ended)); kept != s.Get(manifest.SourceFile) {
		t.Error("the same key replaced the running source")
	}
	select {
	case k := <-ended:
		t.Fatalf("source %s ended for an unchanged key", k)
	default:
	}

	replaced := make(chan struct{})
	go func() { s.Set(manifest.SourceFile, fakeSource(manifest.SourceFile, "b", ended)); close(replaced) }()
	if k := <-ended; k != "a" {
		t.Fatalf("source %s ended, want the replaced a", k)
	}
	<-replaced
	if u := nextUpdate(t, updates); u.Source != manifest.SourceFile || u.Problems[0].Origin != "b" {
		t.Fatalf("update %+v, want the new file source's", u)
	}

	removed := make(chan struct{})
	go func() { s.Set(manifest.SourceFile, nil); close(removed) }()
	if u := nextUpdate(t, updates); u.Source != manifest.SourceFile || len(u.Pods) != 0 || len(u.Problems) != 0 {
		t.Fatalf("update %+v, want the removed source's empty set", u)
	}
	<-removed
	if k := <-ended; k != "b" {
		t.Fatalf("source %s ended, want the removed b", k)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
