// Command icongen renders assets/icon.svg to the PNG sizes desktop
// environments look for (hicolor theme sizes) and to assets/icon.png, the
// 512-pixel icon FyneApp.toml names. Run it from assets/ with go generate.
//
// The SVG is rasterised once at the largest size and scaled down with a
// Catmull-Rom filter: rasterx strokes at 16-24 pixels come out wrong, and a
// filtered downscale is what icon sets are made with anyway.
package main

import (
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"

	"github.com/fyne-io/oksvg"
	"github.com/srwiley/rasterx"
	"golang.org/x/image/draw"
)

// sizes are the hicolor icon-theme sizes a launcher, taskbar or software
// centre picks from.
var sizes = []int{16, 22, 24, 32, 48, 64, 128, 256, 512}

func main() {
	if err := run("icon.svg", "icons"); err != nil {
		fmt.Fprintln(os.Stderr, "icongen:", err)
		os.Exit(1)
	}
}

func run(svg, dir string) error {
	big, err := render(svg, sizes[len(sizes)-1])
	if err != nil {
		return err
	}
	if err := writePNG("icon.png", big); err != nil {
		return err
	}
	for _, n := range sizes {
		img := image.NewRGBA(image.Rect(0, 0, n, n))
		draw.CatmullRom.Scale(img, img.Bounds(), big, big.Bounds(), draw.Src, nil)
		if err := writePNG(filepath.Join(dir, fmt.Sprintf("%dx%d.png", n, n)), img); err != nil {
			return err
		}
	}
	return nil
}

func render(svg string, n int) (image.Image, error) {
	icon, err := oksvg.ReadIcon(svg, oksvg.StrictErrorMode)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", svg, err)
	}
	icon.SetTarget(0, 0, float64(n), float64(n))
	img := image.NewRGBA(image.Rect(0, 0, n, n))
	scanner := rasterx.NewScannerGV(n, n, img, img.Bounds())
	icon.Draw(rasterx.NewDasher(n, n, scanner), 1)
	return img, nil
}

func writePNG(path string, img image.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return f.Close()
}
