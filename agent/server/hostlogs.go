package server

import (
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
)

// hostLogs serves /logs/{path...}: the files and directories beneath root
// (the host's /var/log), as the kubelet's http.FileServer does, but opened
// with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS)
// from root's descriptor: no "..", absolute path or symbolic link a
// process that can write under root plants leads out of it. Only regular
// files and directories are served: a FIFO or a device would block or never
// end.
func hostLogs(root string, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rel := strings.Trim(r.PathValue("path"), "/")
		if rel == "" {
			rel = "."
		}
		// Refused, not cleaned: a request that names ".." is not a log.
		for _, part := range strings.Split(rel, "/") {
			if part == ".." || part == "" || strings.ContainsRune(part, 0) {
				http.Error(w, "path not beneath the log directory", http.StatusBadRequest)
				return
			}
		}
		f, err := openBeneath(root, rel)
		if err != nil {
			code := http.StatusNotFound
			if errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.ELOOP) || errors.Is(err, errNotServed) {
				code = http.StatusForbidden
			}
			logger.Debug("host log refused", "path", rel, "err", err)
			http.Error(w, http.StatusText(code), code)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		switch {
		case fi.IsDir():
			if !strings.HasSuffix(r.URL.Path, "/") {
				http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
				return
			}
			listDir(w, f)
		case fi.Mode().IsRegular():
			// ServeContent reads what the file holds now; a log that grows
			// meanwhile is served up to the size it had.
			http.ServeContent(w, r, fi.Name(), fi.ModTime(), io.NewSectionReader(f, 0, fi.Size()))
		default:
			http.Error(w, "not a regular file", http.StatusForbidden)
		}
	}
}

// errNotServed refuses what is neither a regular file nor a directory.
var errNotServed = errors.New("not a regular file or a directory")

// listDir writes the names in d as http.FileServer does: an HTML list of
// links, directories with a trailing slash.
func listDir(w http.ResponseWriter, d *os.File) {
	ents, err := d.ReadDir(-1)
	if err != nil {
		http.Error(w, "read directory: "+err.Error(), http.StatusInternalServerError)
		return
	}
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	b.WriteString("<!doctype html>\n<meta name=\"viewport\" content=\"width=device-width\">\n<pre>\n")
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		u := url.URL{Path: name}
		fmt.Fprintf(&b, "<a href=\"%s\">%s</a>\n", u.String(), html.EscapeString(name))
	}
	b.WriteString("</pre>\n")
	_, _ = io.WriteString(w, b.String())
}
