package server

import (
	"encoding/json"
	"log/slog"
	"net/http"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WatchEvent is one line of GET /events?watch=true, in the API server's watch
// format: type ADDED for an event new to the watcher, MODIFIED for one counted
// again, ERROR (object a v1.Status) when the watch ends because the client
// fell behind.
type WatchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// Watch event types, as the API server's.
const (
	WatchAdded    = "ADDED"
	WatchModified = "MODIFIED"
	WatchError    = "ERROR"
)

// events serves GET /events: the events the agent keeps as a v1.EventList,
// or with ?watch=true those and then each new or counted one as it comes,
// one WatchEvent per line, until the client goes.
func eventsHandler(a Agent, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := a.Events()
		if r.URL.Query().Get("watch") != "true" {
			list := v1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: rec.List()}
			writeJSON(w, logger, list)
			return
		}
		past, sub := rec.Subscribe()
		defer sub.Close()
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		flusher, _ := w.(http.Flusher)
		sent := map[string]bool{} // event names the client has, to tell ADDED from MODIFIED
		send := func(typ string, obj any) bool {
			b, err := json.Marshal(obj)
			if err != nil {
				logger.Error("encode event failed", "err", err)
				return false
			}
			if err := enc.Encode(WatchEvent{Type: typ, Object: b}); err != nil {
				return false // the client went away
			}
			if flusher != nil {
				flusher.Flush()
			}
			return true
		}
		event := func(ev v1.Event) bool {
			typ := WatchAdded
			if sent[ev.Name] {
				typ = WatchModified
			}
			sent[ev.Name] = true
			return send(typ, ev)
		}
		for _, ev := range past {
			if !event(ev) {
				return
			}
		}
		if flusher != nil {
			flusher.Flush() // the headers, when there was nothing yet
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case ev, ok := <-sub.C():
				if !ok {
					if sub.Dropped() {
						send(WatchError, metav1.Status{
							TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
							Reason: metav1.StatusReasonTimeout, Message: "the watch fell behind the events and was dropped; watch again",
						})
					}
					return
				}
				if !event(ev) {
					return
				}
			}
		}
	}
}
