package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one line of a plot: a case name and its median per x.
type series struct {
	name string
	xy   plotter.XYs
}

// colours keeps one colour per library across plots: lockx red, raw black.
var colours = map[string]color.Color{
	"raw go-redis":      color.RGBA{0x33, 0x33, 0x33, 0xff},
	"bsm/redislock":     color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	"redsync (1 pool)":  color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	"lockx (redislock)": color.RGBA{0xd6, 0x27, 0x28, 0xff},
}

// legend shortens row names for the plots' legends.
var legend = map[string]string{
	nameRaw:     "raw go-redis",
	nameBsm:     "bsm/redislock",
	nameRedsync: "redsync (1 pool)",
	nameLockx:   "lockx (redislock)",
}

// collect gathers, for each name, the median of key in the section's groups,
// with x taken from the group by xOf.
func collect(rs Results, section string, names []string, key string, xOf func(*Result) float64) []series {
	var out []series
	for _, n := range names {
		s := series{name: n}
		if l, ok := legend[n]; ok {
			s.name = l
		}
		for _, r := range rs {
			if r.Case.Section != section || r.Case.Name != n {
				continue
			}
			if v := med(r, key); !math.IsNaN(v) && v > 0 {
				s.xy = append(s.xy, plotter.XY{X: xOf(r), Y: v})
			}
		}
		if len(s.xy) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// linePlot draws series on a log x axis; the y axis is logarithmic when
// the values span more than a factor of 20, else linear from 0.
func linePlot(title, xlabel, ylabel string, ss []series) (*plot.Plot, error) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.xy {
			lo, hi = min(lo, p.Y), max(hi, p.Y)
		}
	}
	logY := hi > 20*lo
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Top = true
		p.Legend.Left = true
	} else {
		p.Y.Min = 0
		p.Y.Tick.Marker = plainTicks{}
	}
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	for i, s := range ss {
		l, pts, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return nil, err
		}
		c, ok := colours[s.name]
		if !ok {
			c = color.Gray{Y: uint8(0x40 + 0x30*(i%4))}
		}
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	return p, nil
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// (25000, not 25000.00).
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// savePanels draws plots side by side into one PNG.
func savePanels(path string, ps ...*plot.Plot) error {
	const w, h = 11 * vg.Inch, 4 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(ps), PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{ps}, tiles, dc)
	for i, p := range ps {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WritePlots draws the scaling plots into dir and returns their file names.
// A plot without data is left out.
func WritePlots(rs Results, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	goroutines := func(r *Result) float64 {
		var n float64
		fmt.Sscanf(r.Case.Group, "%g", &n)
		return n
	}
	names := []string{nameRaw, nameBsm, nameRedsync, nameLockx}
	if rate := collect(rs, scalingSection, names, mRate, goroutines); len(rate) > 0 {
		p1, err := linePlot("Uncontended pairs/s", "goroutines", "pairs/s", rate)
		if err != nil {
			return nil, err
		}
		p2, err := linePlot("Pair latency, p99", "goroutines", "p99 ms", collect(rs, scalingSection, names, mP99, goroutines))
		if err != nil {
			return nil, err
		}
		if err := savePanels(filepath.Join(dir, "scaling-goroutines.png"), p1, p2); err != nil {
			return nil, err
		}
		files = append(files, "scaling-goroutines.png")
	}
	held := func(r *Result) float64 { return med(r, "held") }
	hn := []string{nameRaw, nameLockx}
	if rate := collect(rs, heldSection, hn, mRate, held); len(rate) > 0 {
		p1, err := linePlot("Pairs/s at 16 goroutines while N locks are held", "held locks", "pairs/s", rate)
		if err != nil {
			return nil, err
		}
		p2, err := linePlot("Pair latency, p99", "held locks", "p99 ms", collect(rs, heldSection, hn, mP99, held))
		if err != nil {
			return nil, err
		}
		if err := savePanels(filepath.Join(dir, "scaling-held.png"), p1, p2); err != nil {
			return nil, err
		}
		files = append(files, "scaling-held.png")
	}
	return files, nil
}
