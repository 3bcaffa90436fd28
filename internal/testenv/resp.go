package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// This file holds a minimal RESP2 client: enough to ping servers, read INFO
// and drive CLUSTER and SENTINEL setup without making every test package
// depend on a Redis client library.

// cmdTimeout bounds one dial plus one command.
const cmdTimeout = 2 * time.Second

// respError is an error reply (-ERR ...) from the server.
type respError string

func (e respError) Error() string { return string(e) }

// redisDo dials addr, sends one command and returns its reply: a string
// (simple or bulk), an int64, a []any, nil (null bulk or array), or an error.
// An error reply is returned as a respError.
func redisDo(addr string, args ...string) (any, error) {
	c, err := net.DialTimeout("tcp", addr, cmdTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(cmdTimeout)); err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return nil, err
	}
	reply, err := readReply(bufio.NewReader(c))
	if err != nil {
		return nil, err
	}
	if e, ok := reply.(respError); ok {
		return nil, e
	}
	return reply, nil
}

// redisString runs a command whose reply is a string (INFO, CLUSTER NODES,
// PING, ...).
func redisString(addr string, args ...string) (string, error) {
	r, err := redisDo(addr, args...)
	if err != nil {
		return "", err
	}
	s, ok := r.(string)
	if !ok {
		return "", fmt.Errorf("%s: unexpected reply %T", strings.Join(args, " "), r)
	}
	return s, nil
}

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("malformed RESP line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(r)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, errors.New("unsupported RESP type " + strconv.QuoteRune(rune(kind)))
}

// infoField returns the value of field in an INFO reply ("role" -> "master").
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == field {
			return v
		}
	}
	return ""
}

// pairs turns a flat [k1 v1 k2 v2 ...] reply (SENTINEL REPLICAS entries)
// into a map.
func pairs(r any) map[string]string {
	l, _ := r.([]any)
	m := make(map[string]string, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		k, _ := l[i].(string)
		v, _ := l[i+1].(string)
		m[k] = v
	}
	return m
}
