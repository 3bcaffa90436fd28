package middleware

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// A lookup is a list of places to find one value in a request, written like
// Echo's KeyLookup: "header:Fencing-Token,query:fencing_token". Sources are
// tried in order and the first one present wins.
type lookup []source

type source struct {
	kind string // "header", "query", "param", "cookie"
	name string
}

func parseLookup(s string) (lookup, error) {
	var l lookup
	for _, part := range strings.Split(s, ",") {
		kind, name, ok := strings.Cut(strings.TrimSpace(part), ":")
		kind, name = strings.TrimSpace(kind), strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("lookup %q: want source:name", part)
		}
		switch kind {
		case "header":
			name = http.CanonicalHeaderKey(name)
		case "query", "param", "cookie":
		default:
			return nil, fmt.Errorf("lookup %q: unknown source %q (want header, query, param or cookie)", part, kind)
		}
		l = append(l, source{kind, name})
	}
	return l, nil
}

var errMultiple = errors.New("given more than once")

// extract returns the first value present. param resolves path parameters
// (http.Request.PathValue, echo.Context.Param). A source given more than once
// is an error rather than a choice: a proxy may have appended a value, and
// guessing which one the client meant could let a stale token through.
func (l lookup) extract(r *http.Request, param func(string) string) (string, string, error) {
	for _, s := range l {
		var vals []string
		switch s.kind {
		case "header":
			vals = r.Header[s.name]
		case "query":
			vals = r.URL.Query()[s.name]
		case "param":
			if param != nil {
				if v := param(s.name); v != "" {
					vals = []string{v}
				}
			}
		case "cookie":
			for _, c := range r.CookiesNamed(s.name) {
				vals = append(vals, c.Value)
			}
		}
		switch len(vals) {
		case 0:
			continue
		case 1:
			return vals[0], s.String(), nil
		default:
			return "", s.String(), errMultiple
		}
	}
	return "", "", nil
}

func (s source) String() string { return s.kind + " " + s.name }

func (l lookup) String() string {
	parts := make([]string, len(l))
	for i, s := range l {
		parts[i] = s.kind + ":" + s.name
	}
	return strings.Join(parts, ",")
}
