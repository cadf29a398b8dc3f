function p = fmmkit_plan(kernel, varargin)
  % fmmkit_plan  p = fmmkit_plan(kernel, 'eps', 1e-6, 'method', 'fmm', ...) makes a plan, an
  % fmmkit.Plan handle (options as fmmkit_eval's, without 'targets'). Then:
  %   fmmkit_plan_set_points(p, S, T);  [pot, grad] = fmmkit_plan_eval(p, q);
  %   fmmkit_plan_destroy(p);           % or clear p
  p = fmmkit.Plan(kernel, varargin{:});
end
