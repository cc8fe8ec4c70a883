package main

import (
	"context"
	"time"

	"github.com/staticpodd/staticpodd/agent/events"
)

// trimQuiet is how long the daemon has had no pod event before it gives back
// the memory its start or the last burst of changes touched.
const trimQuiet = 10 * time.Second

// trimEvery is the least time between two trims: events that come now and
// then for ever (a probe failing every 15 s) would otherwise make the daemon
// collect, give back and fault its pages in again after each.
const trimEvery = 5 * time.Minute

// trimWhenQuiet calls trim once the daemon's first sync is done and no event
// came for trimQuiet, and again after each later burst of events, until ctx
// ends. Start-up and a burst of pod starts touch most of the binary's code
// (the kernel maps it 64 KiB at a time) and grow the heap, and neither the
// kernel nor Go gives that back to a process that is idle and not short of
// memory: with 10 pods it was half the daemon's RSS (docs/benchmarks.md).
func trimWhenQuiet(ctx context.Context, rec *events.Recorder, synced <-chan struct{}, trim func()) {
	select {
	case <-ctx.Done():
		return
	case <-synced:
	}
	_, sub := rec.Subscribe()
	defer func() { sub.Close() }()
	quiet := time.NewTimer(trimQuiet)
	defer quiet.Stop()
	armed := true
	var last time.Time // of the last trim
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-sub.C():
			if !ok { // fell behind: the burst goes on
				_, sub = rec.Subscribe()
			}
			quiet.Reset(trimQuiet)
			armed = true
		case <-quiet.C:
			if !armed {
				continue
			}
			if since := time.Since(last); !last.IsZero() && since < trimEvery {
				quiet.Reset(trimEvery - since)
				continue
			}
			trim()
			last, armed = time.Now(), false
		}
	}
}
