package faults

import (
	"net"
	"sync"
	"time"
)

// Proxy is a minimal in-process TCP proxy for network faults, written when
// toxiproxy was not available from the module proxy this project builds
// with (github.com/Shopify/toxiproxy/v2 v2.5.0 now is; redislock's quorum
// tests use it in-process, and its latency and timeout toxics could take
// this one's place here too). Each direction can be delayed
// (latency, order kept) or blackholed (bytes read and dropped, the
// connection left open: a one-way partition). Upstream is client→server,
// downstream server→client.
type Proxy struct {
	Addr string // where clients dial

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	ups   map[net.Conn]struct{} // the connections to target
	lat   [2]time.Duration
	hole  [2]bool
	done  bool
}

// Direction of a fault: Upstream (requests) or Downstream (replies).
type Direction int

const (
	Upstream Direction = iota
	Downstream
)

// NewProxy listens on a free loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}, ups: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// SetLatency delays every chunk in direction d by lat (0 removes it).
func (p *Proxy) SetLatency(d Direction, lat time.Duration) {
	p.mu.Lock()
	p.lat[d] = lat
	p.mu.Unlock()
}

// SetBlackhole drops (on) or passes (off) all bytes in direction d.
func (p *Proxy) SetBlackhole(d Direction, on bool) {
	p.mu.Lock()
	p.hole[d] = on
	p.mu.Unlock()
}

func (p *Proxy) fault(d Direction) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lat[d], p.hole[d]
}

// Reset closes every connection proxied so far (a TCP reset, as a network
// gives eventually to connections whose bytes it dropped); new ones are
// accepted as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// UpstreamAddrs returns the local addresses of the proxy's open
// connections to its target: how the target sees the proxied clients
// (a server's process list names its sessions by them).
func (p *Proxy) UpstreamAddrs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var as []string
	for c := range p.ups {
		as = append(as, c.LocalAddr().String())
	}
	return as
}

// Close stops listening, closes every proxied connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.done = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c) || !p.track(u) {
			c.Close()
			u.Close()
			continue
		}
		p.mu.Lock()
		p.ups[u] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(Upstream, c, u)
		go p.pipe(Downstream, u, c)
	}
}

type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst through the direction's faults. A closed end
// closes both.
func (p *Proxy) pipe(d Direction, src, dst net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 1024)
	var wdone sync.WaitGroup
	wdone.Add(1)
	go func() {
		defer wdone.Done()
		for c := range q {
			if w := time.Until(c.due); w > 0 {
				time.Sleep(w)
			}
			if _, err := dst.Write(c.b); err != nil {
				src.Close()
				for range q {
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			lat, hole := p.fault(d)
			if !hole {
				q <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(lat)}
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	wdone.Wait()
	src.Close()
	dst.Close()
	p.mu.Lock()
	delete(p.conns, src)
	delete(p.conns, dst)
	delete(p.ups, src)
	delete(p.ups, dst)
	p.mu.Unlock()
}
