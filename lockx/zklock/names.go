package zklock

import (
	"sort"
	"strconv"
	"strings"
)

// Namespaces under the root: plain locks, read/write locks, semaphores.
const nsLocks = "locks"

// escape makes s a valid znode name: bytes outside [0-9A-Za-z_:] and, if
// keepDash, '-', become %XX. The result is never "." or "..", contains no
// '/', and with keepDash false contains no '-', which separates the owner
// from the sequence number in a lock node's name.
func escape(s string, keepDash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':', c == '-' && keepDash:
			b.WriteByte(c)
		default:
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// node is one child of a lock's directory: "<escaped owner>-<sequence>".
type node struct {
	name  string
	owner string // escaped
	seq   int64
}

func parseNode(name string) (node, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return node{}, false
	}
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil {
		return node{}, false
	}
	return node{name: name, owner: name[:i], seq: seq}, true
}

// sortedNodes parses and sorts children by sequence number, skipping names
// that are not lock nodes.
func sortedNodes(children []string) []node {
	ns := make([]node, 0, len(children))
	for _, c := range children {
		if n, ok := parseNode(c); ok {
			ns = append(ns, n)
		}
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].seq < ns[j].seq })
	return ns
}
