package connector

import (
	"context"

	"github.com/kmirror/kmirror/connector/verify"
)

// The comparison's types, under the names the mirror's users (kmirror
// verify) know them by.
type (
	VerifyOptions = verify.Options
	VerifyReport  = verify.Report
)

// Verify compares the mirror's copy with its source record by record
// through the offset index stored on the target, without a worker: what
// `kmirror verify` prints (see package verify).
func (m *Mirror) Verify(ctx context.Context, opts VerifyOptions) (VerifyReport, error) {
	c, err := m.newClients()
	if err != nil {
		return VerifyReport{Mirror: m.cfg.Name}, err
	}
	defer c.close()
	defer m.cancelProduce()
	return m.verifyWith(ctx, c, opts)
}

// verifyWith is Verify over the clients of a command already running.
func (m *Mirror) verifyWith(ctx context.Context, c *clients, opts VerifyOptions) (VerifyReport, error) {
	return verify.Verify(ctx, verify.Config{
		Mirror:        m.cfg.Name,
		SourceAlias:   m.cfg.SourceAlias,
		Policy:        m.cfg.Policy,
		SourceOpts:    m.cfg.SourceOpts,
		TargetOpts:    m.cfg.TargetOpts,
		ProgressTopic: m.progressTopic,
		Log:           m.log,
		SrcErr:        m.srcErr,
		DstErr:        m.dstErr,
	}, verify.Clients{SrcAdm: c.srcAdm, DstAdm: c.dstAdm}, opts)
}
