// npukit's notebook widget: the anywidget entry point (bundled into npukit/ui/static/widget.js).
import "./style.css";
import { App } from "./app.js";

export default {
  render({ model, el }) {
    const app = new App(model, el);
    return () => app.destroy();
  },
};
