import { defineConfig } from "vite";

// Built into the Python package (served by the worker at /ui): `make ui`.
export default defineConfig({
  base: "./",
  build: {
    outDir: "../cq_service/service/ui_static",
    emptyOutDir: true,
    sourcemap: false,
  },
  server: { proxy: { "/pipelines": "http://127.0.0.1:8080", "/queries": "http://127.0.0.1:8080" } },
});
