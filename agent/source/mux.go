package source

import (
	"context"
	"slices"
	"sync"
)

// Running is one manifest source of the daemon as Mux runs it: the file
// source or the URL source.
type Running struct {
	// Key is what the source was made from; a reload that changes it
	// replaces the source (the file source's period alone is changed in
	// place).
	Key    string
	Run    func(context.Context, chan<- Update) error // the source's Run, or Once
	Relist func()
	File   *File // the file source; nil for the URL's
	URL    *URL  // the URL source; nil for the file's

	cancel context.CancelFunc // ends Run; set by startLocked
	done   chan struct{}      // closed once Run returned
}

// Mux runs the daemon's manifest sources, and replaces them when a
// reload changes staticPodPath, staticPodURL or how the URL is read. Each
// source sends the whole set of its pods on one channel; a source that is
// replaced is stopped first, so that its last update never follows the
// first of its successor, and a source that is removed leaves an empty set
// behind it: the agent stops the pods it gave, and keeps those of the other
// source untouched.
type Mux struct {
	mu      sync.Mutex // guards the fields below
	ctx     context.Context
	out     chan<- Update
	errc    chan error          // the first error of a source's run
	running map[string]*Running // by manifest.SourceFile, manifest.SourceHTTP
	// wg counts the sources' goroutines, which Run joins before it returns.
	wg sync.WaitGroup
	// emptied are the sources removed before Run: Run sends their empty
	// sets, which the agent may be waiting for.
	emptied []string
}

// NewMux is a Mux with no source yet.
func NewMux() *Mux {
	return &Mux{errc: make(chan error, 1), running: map[string]*Running{}}
}

// Run starts the sources and returns when ctx ends (nil) or one of them
// fails (its error); either way every source has ended when it returns.
func (s *Mux) Run(ctx context.Context, out chan<- Update) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.wg.Wait()
	}()
	s.mu.Lock()
	s.ctx, s.out = ctx, out
	for _, src := range s.running {
		s.startLocked(src)
	}
	emptied := s.emptied
	s.emptied = nil
	s.mu.Unlock()
	for _, name := range emptied {
		select {
		case out <- Update{Source: name}:
		case <-ctx.Done():
			return nil
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.errc:
		return err
	}
}

func (s *Mux) startLocked(src *Running) {
	ctx, cancel := context.WithCancel(s.ctx)
	src.cancel, src.done = cancel, make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(src.done)
		if err := src.Run(ctx, s.out); err != nil && ctx.Err() == nil {
			select {
			case s.errc <- err:
			default:
			}
		}
	}()
}

// Set makes src the source called name, or removes that source (src nil).
// A source with the same key as the running one does not replace it. It
// returns the source called name now; nil when there is none.
func (s *Mux) Set(name string, src *Running) *Running {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.running[name]
	if old != nil && src != nil && old.Key == src.Key {
		return old
	}
	if old != nil && old.cancel != nil {
		old.cancel()
		<-old.done
	}
	if src == nil {
		delete(s.running, name)
		switch {
		case old == nil:
		case s.ctx == nil:
			s.emptied = append(s.emptied, name)
		default:
			// The agent's set of this source is what it sent last: empty it.
			select {
			case s.out <- Update{Source: name}:
			case <-s.ctx.Done():
			}
		}
		return nil
	}
	s.running[name] = src
	s.emptied = slices.DeleteFunc(s.emptied, func(n string) bool { return n == name })
	if s.ctx != nil {
		s.startLocked(src)
	}
	return src
}

// Get returns the source called name; nil when there is none.
func (s *Mux) Get(name string) *Running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[name]
}

// Relist makes every source read its manifests now.
func (s *Mux) Relist() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, src := range s.running {
		src.Relist()
	}
}
