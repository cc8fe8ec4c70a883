package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/source"
)

// mergeObjects combines the ConfigMaps and Secrets of every source's latest
// update into one Set. Two objects of one kind and full name are a problem
// naming both origins, as two pods are (merge): the first by origin is
// kept, so which one pods see does not depend on the order updates came in.
func mergeObjects(updates map[string]source.Update) (*objects.Set, []manifest.Problem) {
	byKey := map[string][]*objects.Object{}
	for _, u := range updates {
		for _, o := range u.Objects {
			byKey[o.Key()] = append(byKey[o.Key()], o)
		}
	}
	kept := make([]*objects.Object, 0, len(byKey))
	var problems []manifest.Problem
	for key, cands := range byKey {
		slices.SortStableFunc(cands, func(a, b *objects.Object) int { return strings.Compare(a.Origin, b.Origin) })
		kept = append(kept, cands[0])
		kind, name, _ := strings.Cut(key, "/")
		for _, other := range cands[1:] {
			problems = append(problems, manifest.Problem{
				Origin: other.Origin,
				Err: fmt.Errorf("%s %s is defined both in %s and in %s; using the one from %s",
					kind, name, cands[0].Origin, other.Origin, cands[0].Origin),
			})
		}
	}
	slices.SortStableFunc(problems, func(a, b manifest.Problem) int { return strings.Compare(a.Origin, b.Origin) })
	return objects.NewSet(kept), problems
}
