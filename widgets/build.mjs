// Bundle src/index.js (+ its CSS) into the one ES module the Python package ships.
//   npm ci && npm run build      -> ../npukit/ui/static/widget.js and widget.css
import * as esbuild from "esbuild";
import { copyFileSync } from "node:fs";

const watch = process.argv.includes("--watch");
const dev = watch || process.argv.includes("--dev");
const options = {
  entryPoints: { widget: "src/index.js" },
  bundle: true,
  format: "esm",
  target: ["es2020"],
  minify: !dev,
  legalComments: "none",
  outdir: "../npukit/ui/static",
  logLevel: "info",
  // plotly's UMD bundle checks for these; keep the output free of a real `require`
  define: { "process.env.NODE_ENV": '"production"' },
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
// the HTML reports inline plotly's basic bundle (bar / scatter charts, 1.2 MB) so they work offline
copyFileSync("node_modules/plotly.js-basic-dist-min/plotly-basic.min.js", "../npukit/ui/static/plotly-basic.min.js");
