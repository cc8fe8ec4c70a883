package mirror

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// What client-go logs through klog while the API server is down (an event
// it cannot post, printed whole; a watch it restarts) reaches the daemon's
// log at debug level only: at the default level, info, none of it shows,
// errors included (logr hands those over without asking Enabled).
func TestKlogDebugOnly(t *testing.T) {
	var buf bytes.Buffer
	level := new(slog.LevelVar)
	level.Set(slog.LevelInfo)
	// As quietKlog sets it; called directly, since quietKlog sets it once
	// per process and another test may have been first.
	klog.SetSlogLogger(slog.New(debugHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})}))
	defer klog.ClearLogger()
	ev := &v1.Event{Message: "Started container etcd"}
	logAll := func() {
		klog.FromContext(context.Background()).Error(errors.New("connection refused"), "Unable to write event (may retry after sleeping)", "event", ev)
		klog.ErrorS(errors.New("connection refused"), "Failed to watch", "event", ev)
		klog.Errorf("legacy %v", ev)
		klog.Infof("legacy info %v", ev)
		utilruntime.HandleError(errors.New("handled"))
		klog.Flush()
	}
	logAll()
	if buf.Len() != 0 {
		t.Errorf("at the info level, client-go's klog output shows:\n%s", buf.String())
	}
	level.Set(slog.LevelDebug)
	logAll()
	if n := strings.Count(buf.String(), "level=DEBUG"); n != 5 || strings.Contains(buf.String(), "level=ERROR") {
		t.Errorf("at the debug level, %d records, want all 5 at DEBUG:\n%s", n, buf.String())
	}
}
