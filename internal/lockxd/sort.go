package lockxd

import "slices"

func sortedNames(m map[string]*tenant) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
