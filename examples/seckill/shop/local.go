package shop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// StartReplicas starts n replicas of the service on loopback ports, all on
// b and sharing one Stats. cfg.Instance is suffixed with the replica number.
func StartReplicas(ctx context.Context, b *Backends, cfg Config, n int) ([]*Service, []string, error) {
	stats := NewStats()
	var (
		svcs []*Service
		urls []string
	)
	base := cfg.Instance
	if base == "" {
		base = "seckill"
	}
	for i := range n {
		c := cfg
		c.Instance = fmt.Sprintf("%s-%d", base, i+1)
		s, err := New(ctx, b, c, stats)
		if err != nil {
			_ = StopReplicas(svcs)
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			_ = s.Shutdown(ctx)
			_ = StopReplicas(svcs)
			return nil, nil, err
		}
		s.Serve(ln)
		svcs = append(svcs, s)
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return svcs, urls, nil
}

// StopReplicas shuts the replicas down gracefully.
func StopReplicas(svcs []*Service) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var errs []error
	for _, s := range svcs {
		errs = append(errs, s.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
