function fmmkit_plan_destroy(p)
  % fmmkit_plan_destroy  Frees the plan p now (a plan already destroyed: nothing happens).
  if ~isa(p, 'fmmkit.Plan')
    error('fmmkit:arg', 'p must be a plan made by fmmkit_plan (an fmmkit.Plan)');
  end
  p.destroy();
end
