//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// TestStartRacesWithOtherPodsRemoval starts containers, some of which fail to
// start, while other pods' sandboxes come and go and containers are listed:
// no container may ever be seen with a made-up exit of a "lost" monitor.
func TestStartRacesWithOtherPodsRemoval(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	ctx := context.Background()

	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	check := func(sts []podspec.ContainerStatus) {
		for _, st := range sts {
			if strings.Contains(st.Message, "monitor") {
				mu.Lock()
				bad = append(bad, st.Name+": "+st.Message)
				mu.Unlock()
			}
		}
	}
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				other := e.pod(true)
				if err := e.rt.CreateSandbox(ctx, other); err != nil {
					t.Error(err)
					return
				}
				if err := e.rt.RemoveSandbox(ctx, other.UID); err != nil {
					t.Error(err)
					return
				}
				sts, err := e.rt.List(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				check(sts)
			}
		})
	}

	var starts sync.WaitGroup
	for i := range 12 {
		starts.Go(func() {
			name := "ok" + string(rune('a'+i))
			script := "exit 0"
			c := e.container(pod, name, script)
			if i%2 == 1 {
				c.Name = "missing" + string(rune('a'+i))
				c.Command = []string{"/no/such/binary"}
			}
			st, err := e.rt.StartContainer(ctx, pod, c)
			if i%2 == 1 {
				// Kept, exited with StartError, until destroyed.
				if !errors.Is(err, podspec.ErrStartFailed) || st.ID == "" {
					t.Errorf("start of %s = %+v, %v; want a container that failed to start", c.Name, st, err)
					return
				}
				check([]podspec.ContainerStatus{st})
				if err := e.rt.Destroy(ctx, st.ID); err != nil {
					t.Error(err)
				}
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			got, err := e.rt.Wait(ctx, st.ID)
			if err != nil {
				t.Error(err)
				return
			}
			check([]podspec.ContainerStatus{got})
			if got.ExitCode != 0 {
				t.Errorf("%s exit %d (%s), want 0", name, got.ExitCode, got.Message)
			}
			if err := e.rt.Destroy(ctx, st.ID); err != nil {
				t.Error(err)
			}
		})
	}
	starts.Wait()
	close(done)
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("containers seen with a lost monitor: %q", bad)
	}
	if err := e.rt.RemoveSandbox(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID)
}
