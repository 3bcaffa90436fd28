// Package redisurl parses the --redis flag that the lockx CLI and lockxd
// share, so that both accept the same forms and explain a bad one the same
// way.
package redisurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// forms names what Parse accepts, for its errors.
const forms = "want host:port or redis://[[user]:password@]host:port[/db] (rediss:// for TLS)"

// Parse reads s as a Redis URL (redis://[[user]:password@]host:port[/db],
// rediss:// for TLS) or as a bare host:port, which means redis://host:port.
// The error names the flag, quotes the value and says which forms are
// accepted: go-redis's own message for "127.0.0.1:6379" ("first path segment
// in URL cannot contain colon") or for "not a url" ("invalid URL scheme: ")
// does not tell a newcomer what to type instead.
func Parse(flag, s string) (*redis.Options, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%s %q: empty; %s", flag, s, forms)
	}
	u := s
	if !strings.Contains(u, "://") {
		u = "redis://" + u
	}
	ro, err := redis.ParseURL(u)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %q: %s; %s", flag, s, strings.TrimPrefix(err.Error(), "redis: "), forms)
	}
	return ro, nil
}
