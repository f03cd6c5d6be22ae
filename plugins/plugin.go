package plugins

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/filters"
	"github.com/kmirror/kmirror/listeners"
	v1 "github.com/kmirror/kmirror/plugins/v1"
)

// Capability names a service a plugin implements.
type Capability = v1.Capability

// The capabilities of protocol v1.
const (
	CapabilityTopicFilter   = v1.CapabilityTopicFilter
	CapabilityGroupFilter   = v1.CapabilityGroupFilter
	CapabilityTopicListener = v1.CapabilityTopicListener
	CapabilityGroupListener = v1.CapabilityGroupListener
)

// Info is what a plugin says about itself.
type Info = v1.Info

// Plugin is one supervised plugin: the current process, restarted when it
// dies, until Close. Its capability accessors return values that stay valid
// across restarts.
type Plugin struct {
	host     *Host
	spec     Spec
	checksum []byte
	log      *slog.Logger
	info     Info // from the first start; the sha256 pin keeps it stable

	mu   sync.RWMutex
	inst *instance // nil while the plugin is down

	restarts atomic.Uint64
	// ctx ends on Close: it stops the supervisor and bounds a restart.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the supervisor returned
}

// Name is the plugin's name in kmirror's config (Spec.Name).
func (p *Plugin) Name() string { return p.spec.Name }

// Info is what the plugin reported at its first start.
func (p *Plugin) Info() Info { return p.info }

// Pid is the current process's id, 0 while the plugin is down.
func (p *Plugin) Pid() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.inst == nil {
		return 0
	}
	return p.inst.pid
}

// Restarts counts the restart attempts since Start.
func (p *Plugin) Restarts() uint64 { return p.restarts.Load() }

func (p *Plugin) current() *instance {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.inst
}

// TopicFilter returns the plugin's TopicFilter, ok=false if it has none.
func (p *Plugin) TopicFilter() (filters.TopicFilter, bool) {
	if !p.info.Has(CapabilityTopicFilter) {
		return nil, false
	}
	return topicFilter{p}, true
}

// GroupFilter returns the plugin's GroupFilter, ok=false if it has none.
func (p *Plugin) GroupFilter() (filters.GroupFilter, bool) {
	if !p.info.Has(CapabilityGroupFilter) {
		return nil, false
	}
	return groupFilter{p}, true
}

// TopicListener returns the plugin's TopicListener, ok=false if it has none.
func (p *Plugin) TopicListener() (listeners.TopicListener, bool) {
	if !p.info.Has(CapabilityTopicListener) {
		return nil, false
	}
	return topicListener{p}, true
}

// GroupListener returns the plugin's GroupListener, ok=false if it has none.
func (p *Plugin) GroupListener() (listeners.GroupListener, bool) {
	if !p.info.Has(CapabilityGroupListener) {
		return nil, false
	}
	return groupListener{p}, true
}

type topicFilter struct{ p *Plugin }

func (f topicFilter) FilterTopics(ctx context.Context, req filters.TopicRequest) (names []string, err error) {
	err = f.p.call(ctx, f.p.current(), "FilterTopics", func(ctx context.Context, c *v1.Client) (err error) {
		names, err = c.FilterTopics(ctx, req)
		return err
	})
	return names, err
}

type groupFilter struct{ p *Plugin }

func (f groupFilter) FilterGroups(ctx context.Context, req filters.GroupRequest) (names []string, err error) {
	err = f.p.call(ctx, f.p.current(), "FilterGroups", func(ctx context.Context, c *v1.Client) (err error) {
		names, err = c.FilterGroups(ctx, req)
		return err
	})
	return names, err
}

type topicListener struct{ p *Plugin }

func (l topicListener) TopicsChanged(ctx context.Context, ch listeners.TopicsChange) error {
	return l.p.call(ctx, l.p.current(), "TopicsChanged", func(ctx context.Context, c *v1.Client) error {
		return c.TopicsChanged(ctx, ch)
	})
}

type groupListener struct{ p *Plugin }

func (l groupListener) GroupsChanged(ctx context.Context, ch listeners.GroupsChange) error {
	return l.p.call(ctx, l.p.current(), "GroupsChanged", func(ctx context.Context, c *v1.Client) error {
		return c.GroupsChanged(ctx, ch)
	})
}

var (
	_ filters.TopicFilter     = topicFilter{}
	_ filters.GroupFilter     = groupFilter{}
	_ listeners.TopicListener = topicListener{}
	_ listeners.GroupListener = groupListener{}
)

// supervise waits for the current process to die and restarts it with
// backoff, until Close.
func (p *Plugin) supervise(inst *instance) {
	defer close(p.done)
	opts := p.host.opts
	delay := opts.MinBackoff
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-inst.rpc.Done():
		}
		p.mu.Lock()
		p.inst = nil
		p.mu.Unlock()
		p.host.metrics.setUp(p.spec.Name, false)
		inst.client.Kill() // the process is gone; this reaps go-plugin's goroutines
		if time.Since(inst.started) >= opts.MaxBackoff {
			delay = opts.MinBackoff
		}
		uptime := time.Since(inst.started).Round(time.Millisecond)
		select {
		case <-p.host.stopping:
			p.log.Info("plugin process exited while kmirror stops", "pid", inst.pid, "uptime", uptime)
			return
		default:
		}
		if inst.stoppedBySignal() {
			// Most likely a SIGTERM to kmirror's whole process group
			// or cgroup: kmirror is stopping too, and says so within
			// shutdownGrace; otherwise someone stopped the plugin
			// alone, and it is restarted.
			if !p.wait(max(delay, shutdownGrace)) {
				p.log.Info("plugin process stopped by a signal, with kmirror", "pid", inst.pid, "uptime", uptime)
				return
			}
			p.log.Warn("plugin process stopped by a signal; restarting", "pid", inst.pid, "uptime", uptime)
		} else {
			p.log.Warn("plugin process died; restarting", "pid", inst.pid, "uptime", uptime, "backoff", delay)
			if !p.wait(delay) {
				return
			}
		}

		for first := true; ; first = false {
			if !first && !p.wait(delay) {
				return
			}
			delay = min(2*delay, opts.MaxBackoff)
			p.restarts.Add(1)
			p.host.metrics.restarted(p.spec.Name)
			next, err := p.startInstance(p.ctx)
			if err != nil {
				p.log.Error("plugin restart failed", "error", err, "next_attempt_in", delay)
				continue
			}
			p.mu.Lock()
			select {
			case <-p.ctx.Done(): // Close raced with the restart
				p.mu.Unlock()
				next.client.Kill()
				return
			default:
			}
			p.inst = next
			p.mu.Unlock()
			p.host.metrics.setUp(p.spec.Name, true)
			p.log.Info("plugin restarted", "pid", next.pid, "restarts", p.restarts.Load(), "start_duration", next.startDuration)
			if f := opts.OnRestart; f != nil {
				f(p.spec.Name)
			}
			inst = next
			break
		}
	}
}

// shutdownGrace is how long a plugin stopped by a signal waits for kmirror
// to say it is stopping (Host.Stopping) before it is restarted: the same
// signal reached kmirror, which needs a moment to act on it.
const shutdownGrace = time.Second

// wait waits d before a restart; false when the plugin is closed or
// kmirror is stopping meanwhile (no restart).
func (p *Plugin) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.ctx.Done():
		return false
	case <-p.host.stopping:
		return false
	case <-t.C:
		return true
	}
}

// Close stops the plugin: it tells the process to exit (it gets 2s before
// it is killed) and waits for its supervisor. Later calls fail with
// ErrPluginShutdown. Close is idempotent.
func (p *Plugin) Close() error {
	p.cancel()
	<-p.done
	p.stop()
	h := p.host
	h.mu.Lock()
	if h.plugins[p.spec.Name] == p {
		delete(h.plugins, p.spec.Name)
	}
	h.mu.Unlock()
	return nil
}

// stop kills the current process, if any.
func (p *Plugin) stop() {
	p.mu.Lock()
	inst := p.inst
	p.inst = nil
	p.mu.Unlock()
	if inst != nil {
		inst.client.Kill()
		p.host.metrics.setUp(p.spec.Name, false)
	}
}
