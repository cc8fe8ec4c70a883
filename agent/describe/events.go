package describe

import (
	"fmt"
	"io"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/staticpodd/staticpodd/agent/events"
)

// EventHeader is the header of `staticpodd events`: kubectl get events'
// columns, with the container.
var EventHeader = []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "CONTAINER", "MESSAGE"}

// EventRow is an event as kubectl get events shows it, with the container.
func EventRow(e v1.Event, now time.Time) []string {
	obj := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
	return []string{LastSeen(e, now), e.Type, e.Reason, obj, orNone(events.Container(e.InvolvedObject.FieldPath)), OneLine(e.Message, 300)}
}

// LastSeen is how long ago e last happened, "5m (x3 over 10m)" for an event
// seen three times.
func LastSeen(e v1.Event, now time.Time) string {
	last := "<unknown>"
	if !e.LastTimestamp.IsZero() {
		last = duration.HumanDuration(now.Sub(e.LastTimestamp.Time))
	}
	if e.Count > 1 && !e.FirstTimestamp.IsZero() {
		last = fmt.Sprintf("%s (x%d over %s)", last, e.Count, duration.HumanDuration(now.Sub(e.FirstTimestamp.Time)))
	}
	return last
}

// watchWidths are the columns of events -w but the last: rows are printed as
// they come, so the widths are fixed and a longer cell is cut, ending in "…".
// kubectl get -w widens its columns as rows come, leaving the header behind.
var watchWidths = []int{18, 7, 20, 36, 16}

// WriteWatchRow writes cells (EventHeader's, or an EventRow) in the fixed
// columns of events -w.
func WriteWatchRow(out io.Writer, cells []string) error {
	var b strings.Builder
	for i, c := range cells[:len(cells)-1] {
		if r := []rune(c); len(r) > watchWidths[i] {
			c = string(r[:watchWidths[i]-1]) + "…"
		}
		fmt.Fprintf(&b, "%-*s   ", watchWidths[i], c)
	}
	b.WriteString(cells[len(cells)-1])
	b.WriteByte('\n')
	_, err := io.WriteString(out, b.String())
	return err
}
