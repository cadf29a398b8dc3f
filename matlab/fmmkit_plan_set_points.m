function fmmkit_plan_set_points(p, sources, targets)
  % fmmkit_plan_set_points  fmmkit_plan_set_points(p, S[, T]): gives the plan its sources S and
  % targets T (N x dim or dim x N; T [] or left out: the sources, self term left out).
  if ~isa(p, 'fmmkit.Plan')
    error('fmmkit:arg', 'p must be a plan made by fmmkit_plan (an fmmkit.Plan)');
  end
  if nargin < 3
    p.set_points(sources);
  else
    p.set_points(sources, targets);
  end
end
