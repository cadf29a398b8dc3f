function [pot, grad] = fmmkit_plan_eval(p, charges)
  % fmmkit_plan_eval  [pot, grad] = fmmkit_plan_eval(p, q): evaluates the plan's sums with
  % charges q (one per source; complex for cauchy2d). The gradient only when asked for.
  if ~isa(p, 'fmmkit.Plan')
    error('fmmkit:arg', 'p must be a plan made by fmmkit_plan (an fmmkit.Plan)');
  end
  if nargout > 1
    [pot, grad] = p.eval(charges);
  else
    pot = p.eval(charges);
  end
end
