package plan

// Report is a plan as `tandem plan --json` prints it, every number in bytes.
type Report struct {
	Fits        bool               `json:"fits"`
	Devices     []DeviceReport     `json:"devices"`
	Suggestions []SuggestionReport `json:"suggestions"`
	HeadModes   []HeadModeJSON     `json:"head_modes,omitempty"`
	Borrow      *BorrowJSON        `json:"borrow,omitempty"`
}

// HeadModeJSON is one HeadOption.
type HeadModeJSON struct {
	Mode       HeadMode      `json:"mode"`
	Fits       bool          `json:"fits"`
	TotalBytes map[int]int64 `json:"total_bytes"`
}

// DeviceReport is one device's budget.
type DeviceReport struct {
	Index         int        `json:"index"`
	Name          string     `json:"name"`
	Role          string     `json:"role"`
	CapacityBytes int64      `json:"capacity_bytes"`
	TotalBytes    int64      `json:"total_bytes"`
	Fits          bool       `json:"fits"`
	Categories    Categories `json:"categories"`
}

// Categories splits a device's total: the target's parts, the draft's
// whole share, and the context overhead. Scratch includes the backend's
// workspace, which serves both models. Experts are the target's routed
// experts kept apart from their blocks (ExpertsOnDevice), on the host's
// memory with --cpu-moe: the system RAM the plan needs beside the GPUs.
type Categories struct {
	Weights   int64 `json:"weights"`
	Embedding int64 `json:"embedding"`
	Head      int64 `json:"head"`
	KV        int64 `json:"kv"`
	Scratch   int64 `json:"scratch"`
	Draft     int64 `json:"draft"`
	Overhead  int64 `json:"overhead"`
	Experts   int64 `json:"experts,omitempty"`
}

// SuggestionReport is a suggestion without its plan.
type SuggestionReport struct {
	Text   string `json:"text"`
	Change Change `json:"change"`
}

// BorrowJSON is the BorrowReport of a head-sharing draft.
type BorrowJSON struct {
	Tensors []string           `json:"tensors"`
	Bytes   int64              `json:"bytes"`
	Chosen  Borrow             `json:"chosen"`
	Options []BorrowOptionJSON `json:"options"`
}

// BorrowOptionJSON is one BorrowOption.
type BorrowOptionJSON struct {
	Mode       Borrow        `json:"mode"`
	Text       string        `json:"text"`
	Fits       bool          `json:"fits"`
	DraftBytes map[int]int64 `json:"draft_bytes"`
}

// Categories is the budget in the report's categories.
func (b Budget) Categories() Categories {
	t := b.Target
	return Categories{
		Weights: t.Weights, Embedding: t.Embedding, Head: t.Head, KV: t.KV, Scratch: sum(t.Scratch, b.Workspace.Total()),
		Draft: b.Draft.Total(), Overhead: b.Overhead, Experts: t.Experts,
	}
}

// Report is p in the JSON form of `tandem plan --json`.
func (p *Plan) Report() Report {
	r := Report{Fits: p.Fits, Devices: []DeviceReport{}, Suggestions: []SuggestionReport{}}
	for _, b := range p.Devices {
		r.Devices = append(r.Devices, DeviceReport{
			Index: b.Device.Index, Name: b.Device.Name, Role: b.Role(),
			CapacityBytes: b.Capacity, TotalBytes: b.Total(), Fits: b.Fits(), Categories: b.Categories(),
		})
	}
	for _, s := range p.Suggestions {
		r.Suggestions = append(r.Suggestions, SuggestionReport{s.Text, s.Change})
	}
	for _, h := range p.Heads {
		r.HeadModes = append(r.HeadModes, HeadModeJSON{h.Mode, h.Fits, h.Totals})
	}
	if p.Borrow != nil {
		br := &BorrowJSON{Tensors: p.Borrow.Tensors, Bytes: p.Borrow.Bytes, Chosen: p.Borrow.Chosen}
		for _, o := range p.Borrow.Options {
			br.Options = append(br.Options, BorrowOptionJSON{o.Mode, o.Text, o.Fits, o.Draft})
		}
		r.Borrow = br
	}
	return r
}
