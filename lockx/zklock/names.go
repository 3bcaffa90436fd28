package zklock

import (
	"sort"
	"strconv"
	"strings"
)

// escape makes s a valid znode name: bytes outside [0-9A-Za-z_:] and, if
// keepDash, '-', become %XX. The result is never "." or "..", contains no
// '/', and with keepDash false contains no '-', which separates the parts
// of a node's name.
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

// node is one child of a key's directory: "<escaped owner>-<sequence>" for
// a plain lock, "<escaped owner>-<tag>-<sequence>" otherwise (tag R or W
// for the sides of a read/write lock, H<n> or Q<n> for n permits held or
// queued for).
type node struct {
	name  string
	owner string // escaped
	tag   string
	seq   int64
}

func parseNode(name string) (node, bool) {
	parts := strings.Split(name, "-")
	n := node{name: name, owner: parts[0]}
	switch len(parts) {
	case 2:
	case 3:
		n.tag = parts[1]
	default:
		return node{}, false
	}
	seq, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
	if err != nil || n.owner == "" {
		return node{}, false
	}
	n.seq = seq
	return n, true
}

// count is the permit count of a semaphore node's tag (H3 → 3).
func (n node) count() int64 {
	if len(n.tag) < 2 {
		return 0
	}
	c, err := strconv.ParseInt(n.tag[1:], 10, 64)
	if err != nil {
		return 0
	}
	return c
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
