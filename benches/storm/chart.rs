//! The chart: goodput over time, one line per strategy, one chart per trigger.

use std::path::Path;

use plotters::prelude::*;

use super::metrics::BUCKET;
use super::run::RunCounts;

/// Writes an SVG of `runs` (one trigger's) to `path`: successful calls per
/// second (each 100 ms bucket times ten, averaged over three buckets),
/// with the trigger's stretch shaded.
pub fn write(
    path: &Path,
    title: &str,
    runs: &[RunCounts],
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let Some(first) = runs.first() else { return Ok(()) };
    let length = first.config.length.as_secs_f64();
    let per_second = |counts: &[u64]| -> Vec<(f64, f64)> {
        let per = 1.0 / BUCKET.as_secs_f64();
        (0..counts.len().saturating_sub(1))
            .map(|i| {
                let window = &counts[i.saturating_sub(1)..(i + 2).min(counts.len())];
                let mean = window.iter().sum::<u64>() as f64 / window.len() as f64;
                ((i as f64 + 0.5) * BUCKET.as_secs_f64(), mean * per)
            })
            .collect()
    };
    let top = runs
        .iter()
        .flat_map(|run| per_second(&run.goodput).into_iter().map(|(_, y)| y))
        .fold(0.0_f64, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..length, 0.0..top.max(1.0))
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("successful calls per second")
        .draw()
        .map_err(|e| e.to_string())?;
    if let Some((from, to)) = first.config.trigger.stretch() {
        let shade = RGBColor(240, 200, 200).mix(0.5);
        chart
            .draw_series([Rectangle::new(
                [(from.as_secs_f64(), 0.0), (to.as_secs_f64(), top)],
                shade.filled(),
            )])
            .map_err(|e| e.to_string())?;
    }
    for (i, run) in runs.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(per_second(&run.goodput), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(run.config.strategy.name())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}
