package oci

import (
	"bytes"
	"time"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// terminationLog, in a container's state dir, is the file bound at the
// container's terminationMessagePath.
const terminationLog = "termination-log"

// maxLogTailRead bounds what is read of the end of a log for a termination
// message: the last MaxTerminationLogLines entries, or enough of them to
// fill MaxTerminationLogBytes, fit in it whatever their length, since no
// entry is longer than mon.MaxLogLine plus its header.
const maxLogTailRead = 2*mon.MaxLogLine + 8<<10

// logTail returns what the last lines entries of a CRI log (the end of one,
// data) say, as `kubectl logs --tail` prints them, cut to its last max bytes
// (the kubelet's readLastStringFromContainerLogs). whole says data begins at
// the start of the log; otherwise its first line, likely cut, is dropped.
// Lines that are not CRI entries are skipped.
func logTail(data []byte, whole bool, lines, max int) string {
	if !whole {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	entries := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(entries) > lines {
		entries = entries[len(entries)-lines:]
	}
	var out []byte
	for _, e := range entries {
		content, full, ok := parseCRIEntry(e)
		if !ok {
			continue
		}
		out = append(out, content...)
		if full {
			out = append(out, '\n')
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return string(out)
}

// parseCRIEntry splits "<RFC3339Nano> <stream> <F|P> <content>".
func parseCRIEntry(e []byte) (content []byte, full, ok bool) {
	ts, rest, ok := bytes.Cut(e, []byte(" "))
	if !ok {
		return nil, false, false
	}
	if _, err := time.Parse(time.RFC3339Nano, string(ts)); err != nil {
		return nil, false, false
	}
	stream, rest, ok := bytes.Cut(rest, []byte(" "))
	if !ok || (string(stream) != "stdout" && string(stream) != "stderr") {
		return nil, false, false
	}
	tag, content, ok := bytes.Cut(rest, []byte(" "))
	if !ok && len(rest) == 1 {
		tag, content, ok = rest, nil, true // an empty line
	}
	if !ok || (string(tag) != "F" && string(tag) != "P") {
		return nil, false, false
	}
	return content, string(tag) == "F", true
}
