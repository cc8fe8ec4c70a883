package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"
)

// followPoll is how often a followed log file is checked for more lines.
const followPoll = 200 * time.Millisecond

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}, the
// kubelet API's path, with ?previous=true and ?follow=true: the container's
// output as it wrote it, CRI framing removed.
func containerLogs(a Agent, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		ns, pod, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
		path, err := a.LogFile(ns, pod, ctr, q.Get("previous") == "true")
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		follow := q.Get("follow") == "true"
		if err := copyCRI(w, f, follow, func() bool {
			if r.Context().Err() != nil {
				return false
			}
			// Follow while this file is still the container's newest.
			cur, err := a.LogFile(ns, pod, ctr, false)
			return err == nil && cur == path
		}); err != nil && r.Context().Err() == nil {
			logger.Debug("log stream ended", "path", path, "err", err)
		}
	}
}

// copyCRI writes the content of CRI log lines ("<time> <stream> <P|F> <text>")
// from r to w. With follow it waits for more at EOF while more() holds.
func copyCRI(w io.Writer, r io.Reader, follow bool, more func() bool) error {
	br := bufio.NewReader(r)
	flusher, _ := w.(http.Flusher)
	var pending []byte
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		chunk, err := br.ReadBytes('\n')
		pending = append(pending, chunk...)
		if err == nil {
			if _, werr := w.Write(criContent(pending)); werr != nil {
				return werr
			}
			pending = pending[:0]
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		if !follow || !more() {
			return nil
		}
		<-tick.C
	}
}

// criContent returns a CRI log line's text, with a newline for a full line (F)
// and none for a partial one (P). A line that is not CRI is passed as is.
func criContent(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte("\n"))
	f := bytes.SplitN(line, []byte(" "), 4)
	if len(f) < 3 {
		return append(line, '\n')
	}
	text := []byte{}
	if len(f) == 4 {
		text = f[3]
	}
	if string(f[2]) == "P" {
		return text
	}
	return append(text, '\n')
}
