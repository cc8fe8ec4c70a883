package agent

import (
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/source"
)

// mergeObjects combines the ConfigMaps and Secrets of every source's latest
// update into one Set. Two objects of one kind and full name are a problem
// naming both origins, as two pods are (merge): the first by origin is
// kept, so which one pods see does not depend on the order updates came in.
func mergeObjects(updates map[string]source.Update) (*objects.Set, []manifest.Problem) {
	var all []*objects.Object
	for _, u := range updates {
		all = append(all, u.Objects...)
	}
	set, dups := objects.Merge(all)
	problems := make([]manifest.Problem, 0, len(dups))
	for _, d := range dups {
		problems = append(problems, manifest.Problem{Origin: d.Dropped.Origin, Err: d})
	}
	return set, problems
}
