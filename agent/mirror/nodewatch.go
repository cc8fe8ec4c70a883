package mirror

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// watchNode keeps m.node the API server's Node from a watch of it alone,
// as the kubelet's node informer does, so that the status loop reads it
// every round without a request (tryUpdateNodeStatus reads its lister):
// the watch costs one request every 5 to 10 minutes, the reads six a
// minute. It lists once, then watches from the last resourceVersion seen
// (bookmarks keep it recent), again when a watch times out, and lists again
// only after an error. While no watch runs, the status loop reads the Node
// itself.
func (m *Mirror) watchNode(ctx context.Context, client api) {
	defer m.setNodeWatched(false)
	bo := newBackoff(200*time.Millisecond, 10*time.Second)
	sel := fields.OneTermEqualSelector("metadata.name", m.cfg.NodeName).String()
	nodes := client.Nodes()
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			lctx, cancel := context.WithTimeout(ctx, requestTimeout)
			list, err := nodes.List(lctx, metav1.ListOptions{FieldSelector: sel})
			cancel()
			if err != nil {
				m.setNodeWatched(false)
				if ctx.Err() == nil {
					m.report("node watch", fmt.Errorf("list node %s: %s", m.cfg.NodeName, oneLine(err)))
				}
				sleep(ctx, bo.next())
				continue
			}
			// The list is the Node as it is now, and replaces the one known
			// however newer that looked, as the reflector's Replace: an API
			// server restored from a backup gives older resourceVersions.
			found := false
			for i := range list.Items {
				if list.Items[i].Name == m.cfg.NodeName {
					m.replaceNode(&list.Items[i])
					found = true
				}
			}
			if !found {
				// The status loop registers it again.
				m.forgetNode()
			}
			rv = list.ResourceVersion
		}
		// The reflector's: a random timeout, so that nodes started together
		// do not all watch again at once.
		timeout := int64((watchTimeout + rand.N(watchTimeout)) / time.Second)
		w, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, TimeoutSeconds: &timeout, AllowWatchBookmarks: true})
		if err != nil {
			m.setNodeWatched(false)
			if ctx.Err() == nil {
				m.report("node watch", fmt.Errorf("watch node %s: %s", m.cfg.NodeName, oneLine(err)))
			}
			rv = ""
			sleep(ctx, bo.next())
			continue
		}
		m.setNodeWatched(true)
		m.report("node watch", nil)
		rv, err = m.followNode(ctx, w, rv, bo)
		w.Stop()
		if err != nil && ctx.Err() == nil {
			m.setNodeWatched(false)
			m.report("node watch", err)
			sleep(ctx, bo.next())
		}
	}
}

// watchTimeout is the shortest a watch asks to last (the reflector's
// minWatchTimeout); each asks for up to twice as long.
const watchTimeout = 5 * time.Minute

// shortWatch is the error of a watch that the server closed within a
// second with no event, which is watched again after the back-off (the
// reflector's "very short watch"); a watch that lasted, or had an event,
// resets the back-off.
func shortWatch(bo *backoff, began time.Time, events int) error {
	if events == 0 && time.Since(began) < time.Second {
		return errors.New("the watch was closed at once, with no event")
	}
	bo.reset()
	return nil
}

// followNode applies a watch's events until it ends, and returns the last
// resourceVersion seen, "" after an error (the next watch lists first).
func (m *Mirror) followNode(ctx context.Context, w watch.Interface, rv string, bo *backoff) (string, error) {
	began, events := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, shortWatch(bo, began, events)
			}
			events++
			if ev.Type == watch.Error {
				return "", fmt.Errorf("watch node %s: %s", m.cfg.NodeName, oneLine(apierrors.FromObject(ev.Object)))
			}
			// An event, not an error one, says the watch works.
			if events == 1 {
				bo.reset()
			}
			n, ok := ev.Object.(*v1.Node)
			if !ok || (ev.Type != watch.Bookmark && n.Name != m.cfg.NodeName) {
				continue
			}
			rv = n.ResourceVersion
			switch ev.Type {
			case watch.Bookmark:
			case watch.Deleted:
				// The status loop registers it again, unless it already
				// did: a late deletion of the Node it replaced is no news.
				m.forgetNodeOf(n.UID)
			default:
				m.setNode(n)
			}
		}
	}
}

// setNodeWatched records whether m.node is the watch's, kept current.
func (m *Mirror) setNodeWatched(on bool) {
	m.nodeMu.Lock()
	defer m.nodeMu.Unlock()
	m.nodeWatched = on
}

// watchedNode is the Node as the watch keeps it, nil while no watch runs
// or it has none.
func (m *Mirror) watchedNode() *v1.Node {
	m.nodeMu.Lock()
	defer m.nodeMu.Unlock()
	if !m.nodeWatched {
		return nil
	}
	return m.node
}
